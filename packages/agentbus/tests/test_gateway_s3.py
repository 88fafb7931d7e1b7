"""The gateway with its payloads in S3 (``AGENTBUS_OBJECT_STORE_URL=s3://bucket/prefix``), on a
real S3 server: a message's payload is sealed into the bucket under the tenant's prefix and
delivered decrypted; while the store is down a send is refused with AB-9004 and leaves no row and
no stream message, and the same signed envelope sent again once the store is back is accepted
and delivered; and while the store is away from a waiting message, pulls stop (the breaker), so
the outage burns one delivery attempt, not one per nak delay, and the message arrives after; a
pull whose payload read waits on a slow store holds no transaction open meanwhile."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from agentbus import broker
from agentbus.gateway.config import GatewaySettings
from agentbus.gateway.context import Gateway
from agentbus.gateway.testing import S3Server, TcpGate, aim, serving
from agentbus.gateway.testkit import SimAgent, World, alice_and_bob, poll_inbox, post_signed
from agentbus.ids import parse_id
from wirekit import canonical_json

SECRET = {"text": "the deploy key rotates on Friday"}


@pytest.fixture
def gateway_settings(
    tmp_path: Path, agentbus_db: str, nats_url: str, s3_url: str
) -> GatewaySettings:
    return GatewaySettings(
        database_url=agentbus_db,
        nats_url=nats_url,
        config_dir=tmp_path / "config",
        background=False,
        object_store_url=s3_url,
    )


def bucket_objects(server: S3Server, url: str) -> dict[str, bytes]:
    bucket = url.removeprefix("s3://").split("/", 1)[0]
    listing = httpx.get(f"{server.endpoint}/{bucket}", params={"list-type": "2"}).text
    keys = [part.split("</Key>", 1)[0] for part in listing.split("<Key>")[1:]]
    return {key: httpx.get(f"{server.endpoint}/{bucket}/{key}").content for key in keys}


def message_rows(url: str) -> int:
    with psycopg.connect(url) as conn:
        row = conn.execute("SELECT count(*) FROM messages").fetchone()
    assert row is not None
    return int(row[0])


async def test_payloads_are_sealed_into_the_bucket_and_delivered_decrypted(
    gateway: Gateway,
    gateway_client: httpx.AsyncClient,
    gateway_settings: GatewaySettings,
    s3_server: S3Server,
) -> None:
    world, alice, bob = await alice_and_bob(gateway, gateway_client)
    env = alice.sign(alice.envelope(bob.address, SECRET))
    reply = await post_signed(gateway_client, alice, env)
    assert reply.status_code == 202, reply.text

    assert gateway_settings.object_store_url is not None
    stored = bucket_objects(s3_server, gateway_settings.object_store_url)
    tenant_prefix = f"payloads/tenants/ten_{world.tenant_id.hex}/payloads/"
    assert [key.startswith(tenant_prefix) for key in stored] == [True]
    assert [key.endswith(f"/{env['id']}.bin") for key in stored] == [True]
    sealed = next(iter(stored.values()))
    assert b"deploy key" not in sealed
    assert not (gateway_settings.objects_dir).exists(), "nothing in the local directory"

    pulled = await poll_inbox(gateway_client, bob, wait_s=5)
    assert [d["envelope"]["data"] for d in pulled["deliveries"]] == [SECRET]


@pytest.fixture
def store_later(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[S3Server]:
    """An S3 server the test starts when it wants the store back; the AWS variables already
    point at it."""
    server = S3Server(tmp_path)
    aim(monkeypatch, server.endpoint)
    yield server
    server.stop()


@contextlib.asynccontextmanager
async def gateway_on(
    tmp_path: Path, agentbus_db: str, nats_url: str, store_url: str, timeout_s: float = 1.0
) -> AsyncIterator[tuple[Gateway, httpx.AsyncClient]]:
    """The gateway app with its payloads at ``store_url``, a request to the store given
    ``timeout_s``."""
    settings = GatewaySettings(
        database_url=agentbus_db,
        nats_url=nats_url,
        config_dir=tmp_path / "config",
        background=False,
        object_store_url=store_url,
        object_store_timeout_s=timeout_s,
    )
    async with serving(settings) as (app, client):
        yield app.state.gateway, client


@pytest.fixture
async def gateway_on_later_store(
    tmp_path: Path, agentbus_db: str, nats_url: str, store_later: S3Server
) -> AsyncIterator[tuple[Gateway, httpx.AsyncClient]]:
    async with gateway_on(tmp_path, agentbus_db, nats_url, "s3://later/payloads") as opened:
        yield opened


async def test_a_send_while_the_store_is_down_is_refused_whole_and_goes_through_later(
    gateway_on_later_store: tuple[Gateway, httpx.AsyncClient],
    store_later: S3Server,
    agentbus_db: str,
) -> None:
    gateway, client = gateway_on_later_store
    world, alice, bob = await alice_and_bob(gateway, client)
    env = alice.sign(alice.envelope(bob.address, SECRET))

    refused = await client.post(
        "/v1/messages",
        content=canonical_json(env),
        headers={**alice.headers(), "Content-Type": "application/cloudevents+json"},
    )
    assert refused.status_code == 503, refused.text
    assert refused.headers["Content-Type"] == "application/problem+json"
    problem = refused.json()
    assert problem["code"] == "AB-9004"
    assert "later" not in refused.text, "the store's address stays inside the gateway"
    assert message_rows(agentbus_db) == 0
    info = await gateway.broker.js.stream_info(broker.stream_name(world.tenant_id))
    assert info.state.messages == 0

    await asyncio.to_thread(store_later.start)
    await asyncio.to_thread(store_later.make_bucket, "later")
    accepted = await post_signed(client, alice, env)  # what the sender's outbox does
    assert accepted.status_code == 202, accepted.text
    pulled = await poll_inbox(client, bob, wait_s=5)
    assert [d["envelope"]["data"] for d in pulled["deliveries"]] == [SECRET]


@dataclass
class Waiting:
    """A message from alice waits for bob; the gateway reaches the store through ``gate``."""

    gate: TcpGate
    gateway: Gateway
    client: httpx.AsyncClient
    world: World
    bob: SimAgent


@contextlib.asynccontextmanager
async def message_behind_a_gate(
    tmp_path: Path,
    agentbus_db: str,
    nats_url: str,
    s3_server: S3Server,
    monkeypatch: pytest.MonkeyPatch,
    timeout_s: float = 1.0,
) -> AsyncIterator[Waiting]:
    bucket = s3_server.bucket(monkeypatch)
    gate = TcpGate(s3_server.port)
    await gate.open()
    aim(monkeypatch, gate.endpoint)
    try:
        async with gateway_on(tmp_path, agentbus_db, nats_url, bucket, timeout_s) as (gw, client):
            world, alice, bob = await alice_and_bob(gw, client)
            env = alice.sign(alice.envelope(bob.address, SECRET))
            assert (await post_signed(client, alice, env)).status_code == 202
            yield Waiting(gate, gw, client, world, bob)
    finally:
        await gate.cut()


Gated = Callable[[float], contextlib.AbstractAsyncContextManager[Waiting]]


@pytest.fixture
def behind_a_gate(
    tmp_path: Path,
    agentbus_db: str,
    nats_url: str,
    s3_server: S3Server,
    monkeypatch: pytest.MonkeyPatch,
) -> Gated:
    """``message_behind_a_gate`` with a store request's timeout to choose."""
    return lambda timeout_s: message_behind_a_gate(
        tmp_path, agentbus_db, nats_url, s3_server, monkeypatch, timeout_s
    )


async def test_pulls_stop_while_the_store_is_away_and_the_message_arrives_after(
    behind_a_gate: Gated,
) -> None:
    async with behind_a_gate(1.0) as waiting:
        gate, client, bob = waiting.gate, waiting.client, waiting.bob
        await gate.cut()
        assert (await poll_inbox(client, bob, wait_s=1))["deliveries"] == []  # naked, 10 s
        away = time.monotonic()
        while time.monotonic() - away < 12:  # past the nak's delay: the copy is due again
            assert (await poll_inbox(client, bob, wait_s=5))["deliveries"] == []
        consumer = broker.consumer_name(parse_id("agt", bob.agent_id))
        stream = broker.stream_name(waiting.world.tenant_id)
        info = await waiting.gateway.broker.js.consumer_info(stream, consumer)
        assert info.delivered.consumer_seq == 1, "one attempt in all, not one per nak delay"

        await gate.open()
        deliveries: list[dict[str, Any]] = []
        back = time.monotonic()
        while not deliveries and time.monotonic() - back < 15:
            deliveries = (await poll_inbox(client, bob, wait_s=5))["deliveries"]
        assert [(d["envelope"]["data"], d["attempt"]) for d in deliveries] == [(SECRET, 2)]


def open_transactions(url: str) -> int:
    """The other sessions of the database inside a transaction (a pipelined one reads as
    ``active`` between its statements, so the state alone does not tell)."""
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            """SELECT count(*) FROM pg_stat_activity
                WHERE datname = current_database() AND xact_start IS NOT NULL
                  AND pid <> pg_backend_pid()"""
        ).fetchone()
    assert row is not None
    return int(row[0])


async def test_a_pull_reading_from_a_slow_store_holds_no_transaction_open(
    behind_a_gate: Gated, agentbus_db: str
) -> None:
    async with behind_a_gate(10.0) as waiting:
        gate, client, bob = waiting.gate, waiting.client, waiting.bob
        gate.stall()
        pull = asyncio.create_task(poll_inbox(client, bob, wait_s=5))
        await asyncio.wait_for(gate.holding.wait(), 10)  # the payload's read is on its way
        assert open_transactions(agentbus_db) == 0, "the pull waits on the store in a transaction"
        gate.flow()
        assert [d["envelope"]["data"] for d in (await pull)["deliveries"]] == [SECRET]
