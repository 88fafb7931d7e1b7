"""Delivery end to end through the app, on real PostgreSQL and NATS: send -> long-poll ->
transport ack -> application ack, nak and redelivery, duplicates suppressed after the ack,
expiry at delivery, term, and the one-connection-per-agent rule."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import psycopg
import pytest
from agentbus.db import SCOPE
from agentbus.delivery import jetstream, outcomes, store
from agentbus.delivery.domain import Status
from agentbus.delivery.service import build_service, nats_client
from agentbus.gateway.context import Gateway
from agentbus.gateway.domain.wire import format_ts
from agentbus.gateway.testkit import (
    SimAgent,
    World,
    enroll,
    make_world,
    post_envelope,
)
from agentbus.gateway.testkit import poll_inbox as poll
from agentbus.gateway.testkit import settle_inbox as settle
from agentbus.ids import parse_id
from platformkit.db.scope import tenant_transaction

Json = dict[str, Any]


async def status_of(client: httpx.AsyncClient, agent: SimAgent, msg_id: str) -> Json:
    reply = await client.get(f"/v1/messages/{msg_id}", headers=agent.headers())
    assert reply.status_code == 200, reply.text
    return dict(reply.json())


async def dlq_reason(gateway: Gateway, world: World, msg_id: str) -> str | None:
    async with tenant_transaction(gateway.pool, SCOPE, world.tenant_id) as conn:
        cur = await conn.execute(
            "SELECT dlq_reason FROM delivery_state WHERE msg_id = %s", (parse_id("msg", msg_id),)
        )
        row = await cur.fetchone()
    return None if row is None else row["dlq_reason"]


@pytest.fixture
async def pair(
    gateway: Gateway, gateway_client: httpx.AsyncClient
) -> tuple[World, SimAgent, SimAgent]:
    world = await make_world(gateway, "acme")
    alice = await enroll(gateway_client, world, "alice")
    bob = await enroll(gateway_client, world, "bob")
    return world, alice, bob


async def test_send_deliver_ack_read(
    gateway_client: httpx.AsyncClient, pair: tuple[World, SimAgent, SimAgent]
) -> None:
    client, (_world, alice, bob) = gateway_client, pair
    env = alice.envelope(bob.address, {"text": "hello bob"})
    receipt = await post_envelope(client, alice, env)
    assert receipt["receipt"]["seq"] is not None

    got = await poll(client, bob, wait_s=5)
    [delivery] = got["deliveries"]
    assert delivery["msg_id"] == env["id"]
    assert delivery["attempt"] == 1
    assert delivery["envelope"]["data"] == {"text": "hello bob"}
    assert delivery["envelope"]["signature"] == alice.sign(env)["signature"]
    assert delivery["sender_key"]["id"] == alice.key_id
    assert delivery["sender_key"]["public_key"] == alice.public_key
    assert (await status_of(client, alice, env["id"]))["status"] == "fetched"

    token = delivery["ack_token"]
    [acked] = await settle(client, bob, "ack", [{"msg_id": env["id"], "ack_token": token}])
    assert acked == {"msg_id": env["id"], "result": "ok", "status": "delivered"}
    [again] = await settle(client, bob, "ack", [{"msg_id": env["id"], "ack_token": token}])
    assert again["result"] == "already_acked"
    assert (await status_of(client, alice, env["id"]))["status"] == "delivered"

    read_at = format_ts(datetime.now(UTC))
    [read] = await settle(client, bob, "read", [{"msg_id": env["id"], "read_at": read_at}])
    assert read == {"msg_id": env["id"], "result": "ok", "status": "read"}
    seen = await status_of(client, alice, env["id"])
    assert (seen["status"], seen["read_at"]) == ("read", read_at)
    assert (await poll(client, bob))["deliveries"] == []


async def test_read_of_a_fetched_message_settles_its_jetstream_copy(
    gateway: Gateway,
    gateway_client: httpx.AsyncClient,
    pair: tuple[World, SimAgent, SimAgent],
) -> None:
    client, (world, alice, bob) = gateway_client, pair
    envs = [alice.envelope(bob.address, {"text": f"n{i}"}) for i in range(3)]
    for env in envs:
        await post_envelope(client, alice, env)
    got = await poll(client, bob, wait_s=5)
    assert [d["msg_id"] for d in got["deliveries"]] == [e["id"] for e in envs]
    reads = [{"msg_id": e["id"]} for e in envs]
    results = await settle(client, bob, "read", reads)
    assert [r["result"] for r in results] == ["ok", "ok", "ok"]
    js = nats_client(gateway.broker).jetstream()
    stream, consumer = f"T_{world.tenant_id.hex}", f"agt_{parse_id('agt', bob.agent_id).hex}"
    for _ in range(40):  # the ack is published, not awaited: give JetStream a moment
        if (await js.consumer_info(stream, consumer)).num_ack_pending == 0:
            break
        await asyncio.sleep(0.05)
    # acked with the read within 2 s, not left to AckWait (30 s)
    assert (await js.consumer_info(stream, consumer)).num_ack_pending == 0
    assert (await poll(client, bob))["deliveries"] == []


async def test_long_poll_returns_when_a_message_arrives(
    gateway_client: httpx.AsyncClient, pair: tuple[World, SimAgent, SimAgent]
) -> None:
    client, (_world, alice, bob) = gateway_client, pair
    env = alice.envelope(bob.address, {"text": "later"})

    async def send_soon() -> None:
        await asyncio.sleep(0.5)
        await post_envelope(client, alice, env)

    sender = asyncio.create_task(send_soon())
    started = asyncio.get_running_loop().time()
    got = await poll(client, bob, wait_s=10)
    await sender
    assert [d["msg_id"] for d in got["deliveries"]] == [env["id"]]
    assert asyncio.get_running_loop().time() - started < 5


async def test_nak_redelivers_and_counts_an_attempt(
    gateway_client: httpx.AsyncClient, pair: tuple[World, SimAgent, SimAgent]
) -> None:
    client, (_world, alice, bob) = gateway_client, pair
    env = alice.envelope(bob.address, {"text": "try again"})
    await post_envelope(client, alice, env)
    [first] = (await poll(client, bob, wait_s=5))["deliveries"]
    item = {"msg_id": env["id"], "ack_token": first["ack_token"], "delay_ms": 300}
    [naked] = await settle(client, bob, "nak", [item])
    assert naked["result"] == "ok"

    [second] = (await poll(client, bob, wait_s=5))["deliveries"]
    assert second["msg_id"] == env["id"]
    assert second["attempt"] == 2
    assert second["ack_token"] != first["ack_token"]
    assert (await status_of(client, alice, env["id"]))["attempts"] == 2
    ok = await settle(client, bob, "ack", [{"msg_id": env["id"], "ack_token": second["ack_token"]}])
    assert ok[0]["status"] == "delivered"
    # A nak after the transport ack changes nothing.
    [late] = await settle(client, bob, "nak", [{**item, "ack_token": second["ack_token"]}])
    assert late["result"] == "already_acked"


async def test_copy_of_an_acked_message_is_dropped(
    gateway: Gateway, gateway_client: httpx.AsyncClient, pair: tuple[World, SimAgent, SimAgent]
) -> None:
    """The transport ack reached PostgreSQL but never JetStream: the next copy is acked and
    dropped by the gateway, never handed out again (05 §10.3)."""
    client, (world, alice, bob) = gateway_client, pair
    env = alice.envelope(bob.address, {"text": "once"})
    await post_envelope(client, alice, env)
    [first] = (await poll(client, bob, wait_s=5))["deliveries"]
    tenant, agent, msg = world.tenant_id, parse_id("agt", bob.agent_id), parse_id("msg", env["id"])
    async with tenant_transaction(gateway.pool, SCOPE, tenant) as conn:
        row = await store.lock(conn, tenant, agent, msg)
        assert row is not None
        moved = await outcomes.acknowledge(conn, tenant, [row], Status.DELIVERED, [None])
        assert moved == {msg}
    subject = build_service(gateway).tokens.verify(first["ack_token"], tenant, agent, msg)
    await jetstream.nak(nats_client(gateway.broker), subject.reply, 0)
    assert (await poll(client, bob, wait_s=2))["deliveries"] == []
    assert (await status_of(client, alice, env["id"]))["status"] == "delivered"
    info = await gateway.broker.js.consumer_info(f"T_{tenant.hex}", f"agt_{agent.hex}")
    assert info.num_ack_pending == 0


async def test_expired_message_is_not_handed_out(
    agentbus_db: str, gateway_client: httpx.AsyncClient, pair: tuple[World, SimAgent, SimAgent]
) -> None:
    """A copy still in the stream after ``expires_at`` (its TTL not applied yet) is termed at
    delivery and the message becomes ``expired`` (05 §4 step 3)."""
    client, (_world, alice, bob) = gateway_client, pair
    later = format_ts(datetime.now(UTC) + timedelta(minutes=5))
    env = alice.envelope(bob.address, {"text": "hurry"}, expires=later)
    await post_envelope(client, alice, env)
    async with await psycopg.AsyncConnection.connect(agentbus_db, autocommit=True) as admin:
        await admin.execute(
            "UPDATE messages SET expires_at = now() - interval '1 second' WHERE id = %s",
            (parse_id("msg", env["id"]),),
        )
    assert (await poll(client, bob, wait_s=1))["deliveries"] == []
    assert (await status_of(client, alice, env["id"]))["status"] == "expired"


async def test_term_dead_letters_with_the_recipients_reason(
    gateway: Gateway, gateway_client: httpx.AsyncClient, pair: tuple[World, SimAgent, SimAgent]
) -> None:
    client, (world, alice, bob) = gateway_client, pair
    env = alice.envelope(bob.address, {"text": "poison"})
    await post_envelope(client, alice, env)
    [first] = (await poll(client, bob, wait_s=5))["deliveries"]
    item = {"msg_id": env["id"], "ack_token": first["ack_token"], "reason": "signature_invalid"}
    [termed] = await settle(client, bob, "term", [item])
    assert termed == {"msg_id": env["id"], "result": "ok", "status": "dead_lettered"}
    assert (await status_of(client, alice, env["id"]))["status"] == "dead_lettered"
    assert await dlq_reason(gateway, world, env["id"]) == "rejected_by_recipient:signature_invalid"
    [late] = await settle(
        client, bob, "ack", [{"msg_id": env["id"], "ack_token": first["ack_token"]}]
    )
    assert late == {"msg_id": env["id"], "result": "terminal", "status": "dead_lettered"}


async def test_tokens_and_batches_are_checked(
    gateway_client: httpx.AsyncClient, pair: tuple[World, SimAgent, SimAgent]
) -> None:
    client, (_world, alice, bob) = gateway_client, pair
    env = alice.envelope(bob.address, {"text": "mine"})
    await post_envelope(client, alice, env)
    [first] = (await poll(client, bob, wait_s=5))["deliveries"]
    forged = first["ack_token"][:-4] + (
        "AAAA" if not first["ack_token"].endswith("AAAA") else "BBBB"
    )
    [bad] = await settle(client, bob, "ack", [{"msg_id": env["id"], "ack_token": forged}])
    assert bad["result"] == "invalid"
    # The sender cannot settle the recipient's delivery with the recipient's token.
    [stolen] = await settle(
        client, alice, "ack", [{"msg_id": env["id"], "ack_token": first["ack_token"]}]
    )
    assert stolen["result"] == "invalid"
    too_many = [{"msg_id": env["id"], "ack_token": first["ack_token"]}] * 501
    reply = await client.post("/v1/inbox/ack", json={"acks": too_many}, headers=bob.headers())
    assert reply.status_code == 413
    assert reply.json()["code"] == "AB-5009"
    reply = await client.get("/v1/inbox", params={"wait_s": 31}, headers=bob.headers())
    assert reply.json()["code"] == "AB-8001"


async def test_a_vanished_consumer_is_recreated_and_old_copies_suppressed(
    gateway: Gateway, gateway_client: httpx.AsyncClient, pair: tuple[World, SimAgent, SimAgent]
) -> None:
    client, (world, alice, bob) = gateway_client, pair
    first = alice.envelope(bob.address, {"text": "one"})
    await post_envelope(client, alice, first)
    [delivery] = (await poll(client, bob, wait_s=5))["deliveries"]
    ack = {"msg_id": first["id"], "ack_token": delivery["ack_token"]}
    await settle(client, bob, "ack", [ack])
    await gateway.broker.delete_consumer(world.tenant_id, bob.agent_id)
    second = alice.envelope(bob.address, {"text": "two"})
    await post_envelope(client, alice, second)
    # The new consumer starts from the stream's beginning; the acked copy is dropped.
    got = await poll(client, bob, wait_s=5)
    assert [d["msg_id"] for d in got["deliveries"]] == [second["id"]]
