"""Hostile heartbeats and enrollments: what an agent reports is checked before it is queued
(the vocabulary refused with a 422 naming the field, free text kept with what PostgreSQL
cannot store replaced and marked, bodies bounded in size and depth), and the fleet flush
isolates its items, so one bad report never loses another agent's."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any
from uuid import UUID

import pytest
from asgi_lifespan import LifespanManager
from fastapi import FastAPI
from platformkit.db.scope import tenant_transaction
from platformkit.passwords import FAST_TEST_POLICY
from pydantic import SecretStr
from strataplane.actions import tokens
from strataplane.agents.heartbeat import parse_heartbeat
from strataplane.agents.telegraf import MAX_HEARTBEAT
from strataplane.app import create_app
from strataplane.db import SCOPE
from strataplane.settings import Settings
from strataplane.simulate.seed import publish
from strataplane.testing import Seed, client_for

NUL, LONE_SURROGATE, HUGE_INT = "\x00", "\ud800", 2**70


def deep_json(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


def big_body(size: int) -> bytes:
    return b"{" + b" " * (size - 2) + b"}"


async def chunked(data: bytes, size: int) -> AsyncIterator[bytes]:
    for start in range(0, len(data), size):
        yield data[start : start + size]


UA = {"User-Agent": "Telegraf/1.39.1 Go/1.24.4"}
HEARTBEAT = "/agents/telegraf/heartbeat"
FILES = {
    "layers/base.toml": 'agentKind = "telegraf"\nowner = "p"\nroutes = ["out"]\n\n'
    "[config.inputs.cpu.default]\npercpu = false\n",
    "routes/out.toml": 'agentKind = "telegraf"\nowner = "p"\n\n'
    '[config.outputs.file.main]\nfiles = ["stdout"]\n',
}


@dataclass
class Agent:
    id: UUID
    name: str
    headers: dict[str, str]

    def beat(self, **fields: Any) -> dict[str, Any]:
        body = {"id": self.name, "version": "Telegraf 1.39.1", "schema": 1, "status": "OK"}
        return {**body, **fields}


@dataclass
class Fleet:
    app: FastAPI
    tenant_id: UUID
    admin_token: str
    enroll_token: str
    agents: list[Agent]

    async def health(self, agent: Agent) -> str:
        async with client_for(self.app, self.admin_token) as http:
            found = (await http.get(f"/api/v1/agents/{agent.id}")).json()
        return str(found["health"])


@pytest.fixture
async def fleet(strataplane_database: str) -> AsyncIterator[Fleet]:
    settings = Settings(database_url=SecretStr(strataplane_database), pool_size=8, shards=2)
    app = create_app(settings, password_policy=FAST_TEST_POLICY)
    async with LifespanManager(app):
        seed = Seed(app.state.services)
        tenant, admin = await seed.tenant()
        admin_token = (await tokens.create_token(seed.ctx(admin, tenant.id), "ops")).plaintext
        await publish(app.state.services.pool, tenant.id, FILES)
        async with client_for(app, admin_token) as http:
            made = await http.post("/api/v1/enrollment-tokens", json={"name": "t"})
            enroll_token = made.json()["token"]
        agents = []
        async with client_for(app, enroll_token) as http:
            for name in ("web-1", "web-2"):
                r = await http.post(
                    "/api/v1/enroll/telegraf", json={"instance_id": name, "hostname": name}
                )
                assert r.status_code == 201, r.text
                cred = {"Authorization": f"Bearer {r.json()['credential']}", **UA}
                agents.append(Agent(UUID(r.json()["agent_id"]), name, cred))
        yield Fleet(app, tenant.id, admin_token, enroll_token, agents)


async def _post(fleet: Fleet, agent: Agent, body: bytes | dict[str, Any]) -> Any:
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    async with client_for(fleet.app) as http:
        return await http.post(HEARTBEAT, content=content, headers=agent.headers)


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"status": "BOGUS"}, "status"),
        ({"status": ["OK"]}, "status"),
        ({"id": "web-2"}, "id"),
        ({"hostname": "not a host name!!"}, "hostname"),
        ({"hostname": 7}, "hostname"),
        ({"schema": 2}, "schema"),
    ],
)
async def test_reported_vocabulary_is_refused_naming_the_field(
    fleet: Fleet, fields: dict[str, Any], field: str
) -> None:
    first = fleet.agents[0]
    refused = await _post(fleet, first, first.beat(**fields))
    assert refused.status_code == 422, refused.text
    problem = refused.json()
    assert problem["code"] == "agent.bad_report"
    assert problem["field"] == field
    assert problem["errors"][0]["field"] == field
    await fleet.app.state.fleet.batcher.flush()
    assert await fleet.health(first) == "pending"  # nothing of it was kept


async def test_enrollment_host_names_follow_rfc_1123(fleet: Fleet) -> None:
    async with client_for(fleet.app, fleet.enroll_token) as http:
        body = {"instance_id": "x", "hostname": "not a host name!!"}
        refused = await http.post("/api/v1/enroll/telegraf", json=body)
    assert refused.status_code == 422
    assert refused.json()["errors"][0]["field"] == "hostname"


async def test_a_failing_item_is_written_alone(fleet: Fleet) -> None:
    """An item that fails its statement (here forced past the checks: NUL in a log line) is
    dropped alone; the other agent's heartbeat in the same flush lands."""
    good, bad = fleet.agents
    assert (await _post(fleet, good, good.beat(status="WARN"))).status_code == 200
    hb = parse_heartbeat(bad.id, bad.name, bad.beat(), None)
    hb.logs = [(bad.id, hb.received_at, "WARN", "inputs.cpu", None, "nul \x00 here", None)]
    batcher = fleet.app.state.fleet.batcher
    batcher.heartbeat(fleet.tenant_id, hb, None)
    await batcher.flush()
    assert await fleet.health(good) == "degraded"
    assert await fleet.health(bad) == "pending"


async def _facts(fleet: Fleet, agent: Agent) -> dict[str, Any]:
    pool = fleet.app.state.services.pool
    async with tenant_transaction(pool, SCOPE, fleet.tenant_id) as conn:
        row = await (
            await conn.execute("SELECT facts FROM agent_instance WHERE id = %s", (agent.id,))
        ).fetchone()
        logs = await (
            await conn.execute(
                "SELECT message FROM agent_log_entry WHERE agent_instance_id = %s", (agent.id,)
            )
        ).fetchall()
    assert row is not None
    return {**row["facts"], "logs": [r["message"] for r in logs]}


def _log(message: str, **attributes: Any) -> dict[str, Any]:
    return {"time": "2026-01-01T00:00:00Z", "level": "WARN", "source": "inputs.cpu",
            "message": message, "attributes": attributes}  # fmt: skip


@pytest.mark.parametrize(
    "text", [NUL, LONE_SURROGATE, f"a{NUL}b{LONE_SURROGATE}c"], ids=["nul", "surrogate", "both"]
)
async def test_unstorable_text_is_kept_replaced_and_marked(fleet: Fleet, text: str) -> None:
    """The report lands with U+FFFD in place of what PostgreSQL cannot store; the other
    agent's report of the same flush lands too."""
    hostile, other = fleet.agents
    body = hostile.beat(
        version=f"Telegraf 1.39.1{text}",
        configurations=[f"/etc/{text}"],
        logs=[_log(f"boom {text}", **{f"k{text}": text, "n": HUGE_INT})],
    )
    accepted = await _post(fleet, hostile, body)
    assert accepted.status_code == 200, accepted.text
    assert (await _post(fleet, other, other.beat(status="FAIL"))).status_code == 200
    await fleet.app.state.fleet.batcher.flush()
    facts = await _facts(fleet, hostile)
    assert facts["repaired"] == ["text"]
    assert all("\x00" not in m and "\ufffd" in m for m in facts["logs"])
    assert "\ufffd" in facts["configurations"][0]
    assert await fleet.health(hostile) == "healthy"
    assert await fleet.health(other) == "failed"


async def test_counts_past_bigint_are_clamped_and_marked(fleet: Fleet) -> None:
    agent = fleet.agents[0]
    stats = {"errors": HUGE_INT, "warnings": -HUGE_INT, "metrics": 1}
    assert (await _post(fleet, agent, agent.beat(statistics=stats))).status_code == 200
    await fleet.app.state.fleet.batcher.flush()
    facts = await _facts(fleet, agent)
    assert facts["statistics"] == {"errors": 2**63 - 1, "warnings": 0, "metrics": 1}
    assert facts["repaired"] == ["statistics"]


@pytest.mark.parametrize(
    ("body", "status", "field"),
    [
        (None, 422, "body"),  # nested 100,000 deep
        (b'{"id": "web-1", "version": ', 422, "body"),
        (b'{"id": "web-1", "version": "\xff"}', 422, "body"),
        ({"id": f"web-1{NUL}", "version": "Telegraf 1.39.1"}, 422, "id"),
        ({"id": "web-1", "version": "Telegraf 1.39.1", "schema": HUGE_INT}, 422, "schema"),
        ({"id": "web-1", "version": "x", "hostname": f"web{NUL}"}, 422, "hostname"),
        ({"id": "web-1", "version": "x", "status": f"OK{NUL}"}, 422, "status"),
    ],
    ids=["deep", "truncated", "not-utf8", "nul-id", "huge-schema", "nul-host", "nul-status"],
)
async def test_hostile_bodies_are_refused_with_a_reason(
    fleet: Fleet, body: bytes | dict[str, Any] | None, status: int, field: str
) -> None:
    agent = fleet.agents[0]
    refused = await _post(fleet, agent, deep_json(100_000) if body is None else body)
    assert refused.status_code == status, refused.text
    assert refused.json()["field"] == field
    assert (await _post(fleet, agent, agent.beat())).status_code == 200  # the next one lands
    await fleet.app.state.fleet.batcher.flush()
    assert await fleet.health(agent) == "healthy"


async def test_an_oversize_body_is_refused_while_it_streams_in(fleet: Fleet) -> None:
    agent = fleet.agents[0]
    async with client_for(fleet.app) as http:
        refused = await http.post(
            HEARTBEAT,
            content=chunked(big_body(MAX_HEARTBEAT + 1), 64 * 1024),
            headers=agent.headers,
        )
    assert refused.status_code == 413
    assert refused.json()["code"] == "content_too_large"


async def test_a_flush_waits_for_the_one_already_writing(fleet: Fleet) -> None:
    """The periodic flush may have taken the queue just before a flush is asked for (by stop,
    or here): the asked-for flush returns only once that batch is written."""
    batcher = fleet.app.state.fleet.batcher
    agent = fleet.agents[0]
    assert (await _post(fleet, agent, agent.beat(status="FAIL"))).status_code == 200
    pool = fleet.app.state.services.pool
    async with tenant_transaction(pool, SCOPE, fleet.tenant_id) as conn:
        await conn.execute(  # hold the agent's row: the first flush waits inside its write
            "SELECT 1 FROM agent_instance WHERE id = %s FOR NO KEY UPDATE", (agent.id,)
        )
        writing = asyncio.create_task(batcher.flush())
        await asyncio.sleep(0.2)  # let it take the queue and reach the lock
        asked = asyncio.create_task(batcher.flush())
        await asyncio.sleep(0.2)
        assert not asked.done(), "a flush returned while an earlier batch was still unwritten"
    await asyncio.wait_for(asyncio.gather(writing, asked), timeout=120)
    assert await fleet.health(agent) == "failed"
