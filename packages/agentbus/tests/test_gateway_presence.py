"""POST /v1/agents/{agt}/heartbeat on the real app and PostgreSQL: the agent's own credential
sets its status, ``last_seen_at``, harness version and host (204); another agent's id or a
malformed one is AB-8002, a bad body AB-8001, no credential AB-1001, all as problem+json; the
``reconcile.presence`` sweep turns agents not seen for 90 s offline and leaves fresh ones."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import psycopg
from agentbus.gateway.actions import presence
from agentbus.gateway.context import Gateway
from agentbus.gateway.testkit import SimAgent, enroll, make_world
from agentbus.ids import parse_id

PROBLEM = "application/problem+json"


def agent_row(url: str, agent: SimAgent) -> dict[str, Any]:
    with psycopg.connect(url) as conn:
        cur = conn.execute(
            """SELECT status::text AS status, last_seen_at, harness_version, last_host
                 FROM agents WHERE id = %s""",
            (parse_id("agt", agent.agent_id),),
        )
        names = [c.name for c in cur.description or []]
        row = cur.fetchone()
    assert row is not None
    return dict(zip(names, row, strict=True))


async def beat(
    client: httpx.AsyncClient, agent: SimAgent, body: Any, agent_id: str | None = None
) -> httpx.Response:
    return await client.post(
        f"/v1/agents/{agent_id or agent.agent_id}/heartbeat", json=body, headers=agent.headers()
    )


def assert_problem(reply: httpx.Response, status: int, code: str) -> None:
    assert reply.status_code == status, reply.text
    assert reply.headers["content-type"].startswith(PROBLEM)
    assert reply.json()["code"] == code


async def test_heartbeat_records_presence_of_the_caller(
    gateway: Gateway, gateway_client: httpx.AsyncClient, agentbus_db: str
) -> None:
    world = await make_world(gateway, "acme")
    alice = await enroll(gateway_client, world, "alice", harness_version="1.0.0")
    assert agent_row(agentbus_db, alice)["status"] == "registered"
    before = datetime.now(UTC)
    body = {"status": "online", "harness_version": "2.1.3", "host": "laptop-7f3a"}
    reply = await beat(gateway_client, alice, body)
    assert reply.status_code == 204, reply.text
    assert reply.content == b""
    row = agent_row(agentbus_db, alice)
    assert row["status"] == "online"
    assert row["last_seen_at"] >= before - timedelta(seconds=1)
    assert (row["harness_version"], row["last_host"]) == ("2.1.3", "laptop-7f3a")
    # What the sidecar sends: status and host; the harness version stays as it was.
    reply = await beat(gateway_client, alice, {"status": "idle", "host": "laptop-7f3b"})
    assert reply.status_code == 204, reply.text
    row = agent_row(agentbus_db, alice)
    assert (row["status"], row["harness_version"], row["last_host"]) == (
        "idle",
        "2.1.3",
        "laptop-7f3b",
    )


async def test_heartbeat_for_another_agent_or_a_bad_body_is_refused(
    gateway: Gateway, gateway_client: httpx.AsyncClient, agentbus_db: str
) -> None:
    world = await make_world(gateway, "acme")
    alice = await enroll(gateway_client, world, "alice")
    bob = await enroll(gateway_client, world, "bob")
    online = {"status": "online"}
    assert_problem(await beat(gateway_client, alice, online, bob.agent_id), 404, "AB-8002")
    assert_problem(await beat(gateway_client, alice, online, "agt_nothex"), 404, "AB-8002")
    assert agent_row(agentbus_db, bob)["status"] == "registered", "bob untouched"
    for bad in ({"status": "offline"}, {"status": "online", "mood": "good"}, {}, {"host": ""}):
        assert_problem(await beat(gateway_client, alice, bad), 422, "AB-8001")
    reply = await gateway_client.post(f"/v1/agents/{alice.agent_id}/heartbeat", json=online)
    assert_problem(reply, 401, "AB-1001")
    assert agent_row(agentbus_db, alice)["last_seen_at"] is None


async def test_sweep_turns_silent_agents_offline(
    gateway: Gateway, gateway_client: httpx.AsyncClient, agentbus_db: str
) -> None:
    world = await make_world(gateway, "acme")
    alice = await enroll(gateway_client, world, "alice")
    bob = await enroll(gateway_client, world, "bob")
    carol = await enroll(gateway_client, world, "carol")
    for agent in (alice, bob):
        assert (await beat(gateway_client, agent, {"status": "online"})).status_code == 204
    assert await presence.sweep(gateway) == 0, "both were just seen"
    later = datetime.now(UTC) + presence.PRESENCE_TTL + timedelta(seconds=1)
    assert await presence.sweep(gateway, now=later) == 2
    assert agent_row(agentbus_db, alice)["status"] == "offline"
    assert agent_row(agentbus_db, bob)["status"] == "offline"
    assert agent_row(agentbus_db, carol)["status"] == "registered", "never seen: left alone"
    assert (await beat(gateway_client, alice, {"status": "online"})).status_code == 204
    assert agent_row(agentbus_db, alice)["status"] == "online"
