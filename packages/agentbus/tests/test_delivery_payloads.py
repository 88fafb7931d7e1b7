"""Payloads at delivery, on real PostgreSQL and NATS: a payload object that is missing or no
longer opens to its digest is dead-lettered (``payload_integrity``) while the rest of the pull is
delivered; with ``inline_payloads`` a small payload travels sealed inside its JetStream copy and
is delivered without the object store, a large one is not inlined, and an inline copy that does
not open is read from the store."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from agentbus import broker
from agentbus.db import SCOPE
from agentbus.gateway.actions.payloads import load_payload
from agentbus.gateway.config import GatewaySettings
from agentbus.gateway.context import Gateway
from agentbus.gateway.domain.wire import b64url_decode
from agentbus.gateway.metrics import PAYLOAD_OPENS
from agentbus.gateway.store.messages import find_message
from agentbus.gateway.testing import serving
from agentbus.gateway.testkit import SimAgent, World, alice_and_bob, poll_inbox, post_envelope
from agentbus.ids import parse_id
from platformkit.db.scope import tenant_transaction

Json = dict[str, Any]


async def send(client: httpx.AsyncClient, sender: SimAgent, to: SimAgent, data: Json) -> Json:
    """Send ``data``; the message's id and its receipt's stream sequence."""
    env = sender.envelope(to.address, data)
    answer = await post_envelope(client, sender, env)
    return {"id": env["id"], "seq": answer["receipt"]["seq"]}


async def row_of(gw: Gateway, world: World, msg_id: str) -> Json:
    async with tenant_transaction(gw.pool, SCOPE, world.tenant_id) as conn:
        row = await find_message(conn, world.tenant_id, parse_id("msg", msg_id))
        assert row is not None
        cur = await conn.execute(
            "SELECT dlq_reason FROM delivery_state WHERE msg_id = %s", (row["id"],)
        )
        state = await cur.fetchone()
    return {**row, "dlq_reason": None if state is None else state["dlq_reason"]}


async def stream_copy(gw: Gateway, world: World, seq: int) -> Json:
    stored = await gw.broker.js.get_msg(broker.stream_name(world.tenant_id), seq)
    copy: Json = json.loads(stored.data or b"{}")
    return copy


def opens(source: str) -> float:
    return PAYLOAD_OPENS.labels(source)._value.get()


@pytest.mark.parametrize("damage", ["missing", "altered"])
async def test_a_payload_that_is_gone_is_dead_lettered_and_the_rest_delivered(
    gateway: Gateway, gateway_client: httpx.AsyncClient, damage: str
) -> None:
    world, alice, bob = await alice_and_bob(gateway, gateway_client)
    lost = await send(gateway_client, alice, bob, {"text": "the object goes"})
    kept = await send(gateway_client, alice, bob, {"text": "this one stays"})
    path = gateway.settings.objects_dir / (await row_of(gateway, world, lost["id"]))["payload_ref"]
    if damage == "missing":
        path.unlink()
    else:
        path.write_bytes(path.read_bytes()[:-1] + b"\x00")
    answer = await poll_inbox(gateway_client, bob, wait_s=2)
    assert [d["msg_id"] for d in answer["deliveries"]] == [kept["id"]]
    assert answer["deliveries"][0]["envelope"]["data"] == {"text": "this one stays"}
    row = await row_of(gateway, world, lost["id"])
    assert (row["status"], row["dlq_reason"]) == ("dead_lettered", "payload_integrity")
    assert (await poll_inbox(gateway_client, bob, wait_s=1))["deliveries"] == []  # termed
    # Reading it is a clear problem, not an internal error.
    reply = await gateway_client.get(
        f"/v1/messages/{lost['id']}", params={"include": "envelope"}, headers=alice.headers()
    )
    assert (reply.status_code, reply.json()["code"]) == (500, "AB-9021")


@pytest.fixture
async def inline_gateway(
    tmp_path: Path, agentbus_db: str, nats_url: str
) -> AsyncIterator[tuple[Gateway, httpx.AsyncClient]]:
    settings = GatewaySettings(
        database_url=agentbus_db, nats_url=nats_url, config_dir=tmp_path / "config",
        background=False, inline_payloads=True,
    )  # fmt: skip
    async with serving(settings) as (app, client):
        yield app.state.gateway, client


async def test_inline_payloads_are_delivered_without_the_object_store(
    inline_gateway: tuple[Gateway, httpx.AsyncClient],
) -> None:
    gw, client = inline_gateway
    world, alice, bob = await alice_and_bob(gw, client)
    data = {"text": "the deploy key rotates on Friday"}
    sent = await send(client, alice, bob, data)
    row = await row_of(gw, world, sent["id"])
    stored = gw.settings.objects_dir / row["payload_ref"]
    copy = await stream_copy(gw, world, sent["seq"])
    assert set(copy["data"]) == {"$ref", "$sealed"}
    assert copy["data"]["$ref"] == row["payload_ref"]
    sealed = b64url_decode(copy["data"]["$sealed"])
    assert sealed == stored.read_bytes()  # the store still holds the copy of record
    assert b"deploy key" not in sealed
    stored.unlink()  # the delivery does not need it
    before = opens("inline")
    [delivery] = (await poll_inbox(client, bob, wait_s=2))["deliveries"]
    assert delivery["envelope"]["data"] == data
    assert opens("inline") == before + 1
    assert (await row_of(gw, world, sent["id"]))["status"] == "fetched"


async def test_large_payloads_are_not_inlined(
    inline_gateway: tuple[Gateway, httpx.AsyncClient],
) -> None:
    gw, client = inline_gateway
    world, alice, bob = await alice_and_bob(gw, client)
    data = {"text": "é" * 40000}  # 80,000 bytes of UTF-8, over the 64 KiB of an inline copy
    sent = await send(client, alice, bob, data)
    row = await row_of(gw, world, sent["id"])
    assert (await stream_copy(gw, world, sent["seq"]))["data"] == {"$ref": row["payload_ref"]}
    [delivery] = (await poll_inbox(client, bob, wait_s=2))["deliveries"]
    assert delivery["envelope"]["data"] == data


async def test_an_inline_copy_that_does_not_open_is_read_from_the_store(
    inline_gateway: tuple[Gateway, httpx.AsyncClient],
) -> None:
    gw, client = inline_gateway
    world, alice, bob = await alice_and_bob(gw, client)
    first = await send(client, alice, bob, {"text": "first"})
    second = await send(client, alice, bob, {"text": "second"})
    row = await row_of(gw, world, first["id"])
    # Another message's sealed payload: valid ciphertext, bound to the other id.
    other = b64url_decode((await stream_copy(gw, world, second["seq"]))["data"]["$sealed"])
    before = opens("store")
    for inline in (other, b"not sealed at all", uuid.uuid4().bytes * 4):
        assert await load_payload(gw, row, inline) == {"text": "first"}
    assert opens("store") == before + 3
