"""Hostile heartbeats and enrollments: what an agent reports is checked before it is queued
(the vocabulary refused with a 422 naming the field), and the fleet flush isolates its items,
so one bad report never loses another agent's."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any
from uuid import UUID

import pytest
from asgi_lifespan import LifespanManager
from fastapi import FastAPI
from platformkit.passwords import FAST_TEST_POLICY
from pydantic import SecretStr
from strataplane.actions import tokens
from strataplane.agents.heartbeat import parse_heartbeat
from strataplane.app import create_app
from strataplane.settings import Settings
from strataplane.simulate.seed import publish
from strataplane.testing import Seed, client_for

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
