"""Send limits through the real app, PostgreSQL and NATS (05 §11, 04 §1.6), with the tenant's
subscription overriding the plan: past ``publish_per_minute`` a send is 429 AB-5003 with
``Retry-After`` and ``retry_after_ms``, a replay still answers; past ``pending_per_agent`` it is
429 AB-5004; with the stream at ``stream_bytes`` it is 507 AB-5005. A refused send stores no row,
no payload object and no stream message."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import psycopg
from agentbus import broker
from agentbus.gateway.actions.send_limits import INFO_TTL_S
from agentbus.gateway.context import Gateway
from agentbus.gateway.testkit import SimAgent, World, enroll, make_world
from psycopg.types.json import Jsonb
from wirekit import canonical_json

CE = {"Content-Type": "application/cloudevents+json"}


def override(url: str, world: World, **limits: int) -> None:
    with psycopg.connect(url) as conn:
        conn.execute(
            "UPDATE subscriptions SET overrides = %s WHERE tenant_id = %s",
            (Jsonb(limits), world.tenant_id),
        )


def stored(url: str, gw: Gateway) -> tuple[int, int]:
    """(message rows, payload objects)."""
    with psycopg.connect(url) as conn:
        row = conn.execute("SELECT count(*) FROM messages").fetchone()
    assert row is not None
    return int(row[0]), len(list(gw.settings.objects_dir.rglob("*.bin")))


async def in_stream(gw: Gateway, world: World) -> int:
    info = await gw.broker.js.stream_info(broker.stream_name(world.tenant_id))
    return int(info.state.messages)


async def send(
    client: httpx.AsyncClient, agent: SimAgent, to: SimAgent, env: dict[str, Any] | None = None
) -> tuple[httpx.Response, dict[str, Any]]:
    env = env or agent.sign(agent.envelope(to.address, {"text": "hi"}))
    reply = await client.post(
        "/v1/messages", content=canonical_json(env), headers={**agent.headers(), **CE}
    )
    return reply, env


def problem(reply: httpx.Response, status: int, code: str) -> dict[str, Any]:
    assert reply.status_code == status, reply.text
    assert reply.headers["content-type"].startswith("application/problem+json")
    body: dict[str, Any] = json.loads(reply.content)
    assert body["code"] == code
    return body


async def setup(gw: Gateway, client: httpx.AsyncClient) -> tuple[World, SimAgent, SimAgent]:
    world = await make_world(gw, "acme")
    return world, await enroll(client, world, "alice"), await enroll(client, world, "bob")


async def test_rate_limit_refuses_with_retry_after_and_stores_nothing(
    gateway: Gateway, gateway_client: httpx.AsyncClient, agentbus_db: str
) -> None:
    world, alice, bob = await setup(gateway, gateway_client)
    override(agentbus_db, world, publish_per_minute=3)
    first = None
    for _ in range(3):
        reply, env = await send(gateway_client, alice, bob)
        assert reply.status_code == 202, reply.text
        first = first or env
    before = stored(agentbus_db, gateway), await in_stream(gateway, world)
    reply, _ = await send(gateway_client, alice, bob)
    body = problem(reply, 429, "AB-5003")
    assert body["name"] == "rate_limited"
    retry_s = int(reply.headers["Retry-After"])
    assert 1 <= retry_s <= 20, "one token per 20 s at 3 per minute"
    assert 0 < body["retry_after_ms"] <= retry_s * 1000
    assert (stored(agentbus_db, gateway), await in_stream(gateway, world)) == before
    # A replay takes no token and still answers; other senders have their own bucket.
    assert first is not None
    replay, _ = await send(gateway_client, alice, bob, first)
    assert replay.status_code == 200, replay.text
    assert replay.headers["Idempotent-Replayed"] == "true"
    answer, _ = await send(gateway_client, bob, alice)
    assert answer.status_code == 202, answer.text


async def test_recipient_backlog_limit(
    gateway: Gateway, gateway_client: httpx.AsyncClient, agentbus_db: str
) -> None:
    world, alice, bob = await setup(gateway, gateway_client)
    override(agentbus_db, world, pending_per_agent=2)
    for _ in range(2):
        reply, _ = await send(gateway_client, alice, bob)
        assert reply.status_code == 202, reply.text
    await asyncio.sleep(INFO_TTL_S + 0.2)  # the backlog is cached for up to two seconds
    before = stored(agentbus_db, gateway), await in_stream(gateway, world)
    reply, _ = await send(gateway_client, alice, bob)
    body = problem(reply, 429, "AB-5004")
    assert int(reply.headers["Retry-After"]) >= 1
    assert body["retry_after_ms"] > 0
    assert (stored(agentbus_db, gateway), await in_stream(gateway, world)) == before
    # Another recipient's backlog is its own.
    other, _ = await send(gateway_client, bob, alice)
    assert other.status_code == 202, other.text


async def test_stream_full(
    gateway: Gateway, gateway_client: httpx.AsyncClient, agentbus_db: str
) -> None:
    world, alice, bob = await setup(gateway, gateway_client)
    reply, _ = await send(gateway_client, alice, bob)
    assert reply.status_code == 202, reply.text
    override(agentbus_db, world, stream_bytes=1)
    await asyncio.sleep(INFO_TTL_S + 0.2)  # effective limits are cached for up to two seconds
    before = stored(agentbus_db, gateway), await in_stream(gateway, world)
    reply, _ = await send(gateway_client, alice, bob)
    problem(reply, 507, "AB-5005")
    assert "Retry-After" not in reply.headers
    assert (stored(agentbus_db, gateway), await in_stream(gateway, world)) == before
