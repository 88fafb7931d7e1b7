"""Vector end to end against the real served app (granian in its own process) with simulated
Vector instances polling through their http provider: enroll -> poll -> heartbeat -> in_sync; a
change picked up by the next poll; a changed global option reported as restart_required while
the old configuration keeps running; a configuration Vector cannot build halts a rollout at the
canary; Telegraf and Vector agents served from one spec revision; hostile input on every Vector
route refused with a 4xx."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

import pytest
from platformkit.db.scope import tenant_transaction
from strataplane.actions import fleet_enrollment, rollouts, secrets
from strataplane.actions.context import Ctx, Services
from strataplane.db import SCOPE
from strataplane.simulate.http import HttpPool
from strataplane.simulate.seed import publish
from strataplane.simulate.telegraf import SimulatedTelegraf
from strataplane.simulate.vector import SimulatedVector
from strataplane.store import fleet_agents, fleet_artifacts
from strataplane.testing import Seed
from strataplane.testing.served import (
    enroll,
    get_agent,
    merge_files,
    platform_tenant,
    reviewers,
    stop,
)
from strataplane.testing.spec_files import (
    TELEGRAF_ROUTE,
    VECTOR_ROUTE,
    fleet_settings,
    telegraf_layer,
)

LAYER = """agentKind = "vector"
owner = "platform"
routes = ["out"]
{globals}
[config.sources.app]
type = "file"
include = ["/var/log/app/{name}.log"]
"""
# Loads (every type exists), but the remap program does not compile: Vector keeps the old one.
BROKEN = """
[config.transforms.parse]
type = "remap"
inputs = ["app"]
source = ". = parse_json!(.message"
"""
POLICY = """owner = "platform"
agentKinds = ["vector"]

[[stages]]
name = "canary"
bakeTime = "4s"
selector = { matchLabels = { canary = "true" } }

[[stages]]
name = "everything"
bakeTime = "2s"

[guardrails]
maxApplyFailurePercent = 0
maxHealthRegressionPercent = 100
"""
NUL, HUGE_INT = "\x00", 2**70


def tree(name: str = "app", globals_: str = "", extra: str = "") -> dict[str, str]:
    return {
        "layers/base.toml": LAYER.format(name=name, globals=globals_) + extra,
        "routes/out.toml": VECTOR_ROUTE,
        "layers/telegraf.toml": telegraf_layer(),
        "routes/influx.toml": TELEGRAF_ROUTE,
        "settings.toml": fleet_settings("telegraf", "vector", default_policy="staged"),
        "policies/rollout/staged.toml": POLICY,
    }


@dataclass
class Fleet:
    seed: Seed
    tenant_id: UUID
    author: Ctx
    approver: Ctx
    admin: Ctx
    pool: HttpPool
    tokens: dict[str, str]
    tasks: list[asyncio.Task[None]] = field(default_factory=list)

    @property
    def services(self) -> Services:
        return self.seed.services

    async def enroll(self, name: str, group: str = "fleet", kind: str = "vector") -> dict[str, Any]:
        return await enroll(self.pool, self.tokens[group], name, kind)

    def vector(self, enrolled: dict[str, Any]) -> SimulatedVector:
        sim = SimulatedVector(
            self.pool,
            "/agents/vector/config",
            {**enrolled["environment"], "HOSTNAME": f"{enrolled['instance_id']}.example.com"},
            poll_interval=0.3,
            retry_delay=0.2,
            retries=20,
        )
        self.tasks.append(asyncio.create_task(sim.run()))
        return sim

    async def agent(self, agent_id: str) -> fleet_agents.Agent:
        return await get_agent(self.services, self.tenant_id, agent_id)

    async def until(
        self, check: Callable[[], Awaitable[bool]], what: str, within: float = 60
    ) -> None:
        deadline = asyncio.get_running_loop().time() + within
        while not await check():
            assert asyncio.get_running_loop().time() < deadline, what
            await asyncio.sleep(0.2)

    async def merge(self, files: dict[str, str]) -> int:
        return await merge_files(self.author, self.approver, files)


@pytest.fixture
async def fleet(served: str, served_seed: Seed) -> AsyncIterator[Fleet]:
    seed = served_seed
    tenant, _, admin_ctx = await platform_tenant(seed)
    author, approver = await reviewers(seed, admin_ctx, tenant.id)
    tokens = {}
    for group, kind, labels in (
        ("canary", "vector", {"canary": "true"}),
        ("fleet", "vector", {"env": "prod"}),
        ("telegraf", "telegraf", {"env": "prod"}),
    ):
        made = await fleet_enrollment.create_enrollment_token(
            admin_ctx, group, agent_kind=kind, labels=labels
        )
        tokens[group] = made.plaintext
    http = HttpPool(served, size=20)
    f = Fleet(seed, tenant.id, author, approver, admin_ctx, http, tokens)
    yield f
    await stop(f.tasks)
    await http.close()


async def test_enroll_poll_heartbeat_in_sync_then_a_change_is_picked_up(fleet: Fleet) -> None:
    first = await publish(fleet.services.pool, fleet.tenant_id, tree())
    enrolled = await fleet.enroll("vec-1")
    assert enrolled["credential"].startswith("spv_")
    assert enrolled["config_url"].endswith("/agents/vector/config")
    assert "interpolate_env = true" in enrolled["bootstrap"]
    assert "Bearer ${STRATAPLANE_VECTOR_TOKEN}" in enrolled["bootstrap"]
    sim = fleet.vector(enrolled)
    agent_id = enrolled["agent_id"]

    async def in_sync_at(revision: int) -> bool:
        a = await fleet.agent(agent_id)
        return a.sync == "in_sync" and a.applied_revision_id == revision

    await fleet.until(lambda: in_sync_at(first), "the agent proves r1")
    a = await fleet.agent(agent_id)
    assert a.health == "healthy"
    assert a.version == "0.57.0"
    assert a.applied_artifact is not None
    assert sim.config_hash == a.applied_artifact.hex()
    assert sim.running is not None
    assert "app" in sim.running["sources"]

    second = await publish(fleet.services.pool, fleet.tenant_id, tree(name="other"))
    await fleet.until(lambda: in_sync_at(second), "the next poll picks the change up")
    assert sim.reloads >= 1
    assert sim.running["sources"]["app"]["include"] == ["/var/log/app/other.log"]
    assert sim.config_hash == (await fleet.agent(agent_id)).applied_artifact.hex()  # type: ignore[union-attr]


async def test_a_changed_global_option_is_reported_as_restart_required(fleet: Fleet) -> None:
    first = await publish(fleet.services.pool, fleet.tenant_id, tree())
    enrolled = await fleet.enroll("vec-global")
    sim = fleet.vector(enrolled)
    agent_id = enrolled["agent_id"]

    async def in_sync() -> bool:
        a = await fleet.agent(agent_id)
        return a.sync == "in_sync" and a.applied_revision_id == first

    await fleet.until(in_sync, "the agent proves r1")
    running = sim.config_hash
    changed = await publish(
        fleet.services.pool, fleet.tenant_id, tree(globals_='\n[config]\ntimezone = "UTC"\n')
    )

    async def restart_required() -> bool:
        a = await fleet.agent(agent_id)
        return a.sync == "out_of_sync" and a.sync_reason == "restart_required"

    await fleet.until(restart_required, "Vector's refusal reaches the server")
    a = await fleet.agent(agent_id)
    assert a.desired_revision_id == changed
    assert a.served_artifact == a.desired_artifact
    assert a.applied_revision_id == first  # the old configuration keeps running
    assert sim.config_hash == running
    assert sim.rejected >= 1
    assert a.health == "degraded"  # Vector logged the refusal at ERROR

    # a restart loads the new configuration: the process starts again from the provider
    for task in fleet.tasks:
        task.cancel()
    await asyncio.gather(*fleet.tasks, return_exceptions=True)
    fleet.vector(enrolled)

    async def proven() -> bool:
        a = await fleet.agent(agent_id)
        return a.sync == "in_sync" and a.applied_revision_id == changed

    await fleet.until(proven, "the restarted Vector proves the change")


async def test_a_config_vector_cannot_build_halts_the_rollout_at_the_canary(fleet: Fleet) -> None:
    first = await publish(fleet.services.pool, fleet.tenant_id, tree())
    members = [await fleet.enroll("vec-canary", "canary"), await fleet.enroll("vec-web", "fleet")]
    sims = [fleet.vector(e) for e in members]
    ids = [e["agent_id"] for e in members]

    async def all_in_sync_at(revision: int) -> bool:
        found = [await fleet.agent(a) for a in ids]
        return all(a.sync == "in_sync" and a.applied_revision_id == revision for a in found)

    await fleet.until(lambda: all_in_sync_at(first), "the fleet runs r1")
    good = (await fleet.agent(ids[1])).desired_artifact
    changed = await fleet.merge({"layers/base.toml": LAYER.format(name="app", globals="") + BROKEN})
    [ro] = await rollouts.list_rollouts(fleet.admin, limit=1)
    assert ro.to_revision_id == changed
    assert ro.agent_kind == "vector"

    async def halted() -> bool:
        return (await rollouts.access_rollout(fleet.admin, ro.number)).rollout.state == "halted"

    await fleet.until(halted, "the rollout halts at the canary")
    view = await rollouts.access_rollout(fleet.admin, ro.number)
    assert view.rollout.halt_reason is not None
    assert "stage canary: maxApplyFailurePercent" in view.rollout.halt_reason
    canary = await fleet.agent(ids[0])
    assert canary.sync == "out_of_sync"
    assert canary.sync_reason == "reload_failed"
    assert canary.applied_revision_id == first  # Vector rolled back to what it ran
    assert sims[0].rejected >= 1
    assert "parse" not in (sims[0].running or {}).get("transforms", {})
    web = await fleet.agent(ids[1])  # the later stage never received it
    assert web.desired_artifact == good
    assert sims[1].reloads == 0


async def test_telegraf_and_vector_served_from_one_revision(fleet: Fleet) -> None:
    revision = await publish(fleet.services.pool, fleet.tenant_id, tree())
    vec = await fleet.enroll("mixed-vec")
    tel = await fleet.enroll("mixed-tel", "telegraf", kind="telegraf")
    vsim = fleet.vector(vec)
    tsim = SimulatedTelegraf(
        fleet.pool, "/agents/telegraf/config", dict(tel["environment"]), watch_interval=0.3
    )
    fleet.tasks.append(asyncio.create_task(tsim.run()))

    async def both() -> bool:
        found = [await fleet.agent(e["agent_id"]) for e in (vec, tel)]
        return all(a.sync == "in_sync" and a.applied_revision_id == revision for a in found)

    await fleet.until(both, "both kinds prove the same revision")
    assert vsim.running is not None
    assert "sinks" in vsim.running
    assert tsim.config_hash is not None
    assert tsim.config_hash != vsim.config_hash
    # a credential works only on its own kind's endpoints
    bad = await fleet.pool.request(
        "GET",
        "/agents/telegraf/config",
        {"Authorization": f"Bearer {vec['credential']}", "User-Agent": "Telegraf/1.39.1"},
    )
    assert bad.status == 401
    bad = await fleet.pool.request(
        "GET", "/agents/vector/config", {"Authorization": f"Bearer {tel['credential']}"}
    )
    assert bad.status == 401
    # a Vector enrollment token does not enroll a Telegraf and the reverse
    body = json.dumps({"instance_id": "x", "hostname": "x.example.com"}).encode()
    for kind, group in (("telegraf", "fleet"), ("vector", "telegraf")):
        reply = await fleet.pool.request(
            "POST",
            f"/api/v1/enroll/{kind}",
            {"Authorization": f"Bearer {fleet.tokens[group]}", "Content-Type": "application/json"},
            body,
        )
        assert reply.status == 401, reply.body
        assert json.loads(reply.body)["code"] == "enrollment.rejected"


def _deep(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


async def test_hostile_input_on_vector_routes_is_refused_with_a_4xx(fleet: Fleet) -> None:
    await publish(fleet.services.pool, fleet.tenant_id, tree())
    enrolled = await fleet.enroll("vec-hostile")
    name = enrolled["instance_id"]
    auth = {"Authorization": f"Bearer {enrolled['credential']}"}
    beat = {**auth, "X-Strataplane-Instance-Id": name, "Content-Type": "application/x-ndjson"}
    cases: list[tuple[dict[str, str], bytes, int]] = [
        (beat, json.dumps({"message": NUL, "metadata": {"level": "ERROR"}}).encode(), 200),
        (beat, json.dumps({"name": "uptime_seconds", "tags": {}, "v": HUGE_INT}).encode(), 200),
        (beat, _deep(100), 422),
        (beat, b"\x00\xff not json", 422),
        (beat, b"[]\n", 422),
        (beat, b"{}\n" * 1001, 422),
        (beat, b"{" + b" " * (2 << 20) + b"}", 413),
        ({**beat, "X-Strataplane-Instance-Id": "someone-else"}, b"{}\n", 422),
        ({"Authorization": "Bearer spv_" + "A" * 52}, b"{}\n", 401),
    ]
    for headers, body, status in cases:
        reply = await fleet.pool.request("POST", "/agents/vector/heartbeat", headers, body)
        assert reply.status == status, (body[:40], reply.status, reply.body[:300])
        if status >= 400:
            assert json.loads(reply.body)["status"] == status
    reply = await fleet.pool.request("GET", "/agents/vector/heartbeat", auth)
    assert reply.status == 405
    for payload in (
        {"instance_id": NUL, "hostname": "h.example.com"},
        {"instance_id": "a", "hostname": "h" * 300},
        {"instance_id": HUGE_INT, "hostname": "h.example.com"},
    ):
        reply = await fleet.pool.request(
            "POST",
            "/api/v1/enroll/vector",
            {
                "Authorization": f"Bearer {fleet.tokens['fleet']}",
                "Content-Type": "application/json",
            },
            json.dumps(payload).encode(),
        )
        assert reply.status == 422, (payload, reply.body[:300])
    reply = await fleet.pool.request(
        "POST",
        "/api/v1/enroll/vector",
        {"Authorization": f"Bearer {fleet.tokens['fleet']}", "Content-Type": "application/json"},
        _deep(10_000),
    )
    assert 400 <= reply.status < 500
    a = await fleet.agent(enrolled["agent_id"])
    assert a.health in ("pending", "healthy", "degraded")


SECRET_ROUTE = """agentKind = "vector"
owner = "platform"

[config.sinks.api]
type = "http"
inputs = ["app"]
uri = "https://logs.example.com/ingest"
encoding = { codec = "json" }
auth = { strategy = "bearer", token = "secret://API_TOKEN" }
"""
SECRET = 'owner = "platform"\n\n[grant]\nmatchLabels = { env = "prod" }\n'


async def test_a_secret_reaches_vector_as_a_value_and_never_sits_in_the_artifact(
    fleet: Fleet,
) -> None:
    files = {**tree(), "routes/api.toml": SECRET_ROUTE, "secrets/API_TOKEN.toml": SECRET}
    files["layers/base.toml"] = files["layers/base.toml"].replace(
        'routes = ["out"]', 'routes = ["out", "api"]'
    )
    first_value = 'v1 "quoted" $HOME ${HOME} \\ end'
    await publish(fleet.services.pool, fleet.tenant_id, files)
    await secrets.set_secret(fleet.admin, "API_TOKEN", first_value)
    enrolled = await fleet.enroll("vec-s1")  # env = prod: the grant admits it
    sim = fleet.vector(enrolled)
    agent_id = enrolled["agent_id"]

    def token() -> Any:
        return (sim.running or {}).get("sinks", {}).get("api", {}).get("auth", {}).get("token")

    async def in_sync() -> bool:
        return (await fleet.agent(agent_id)).sync == "in_sync"

    await fleet.until(in_sync, "the agent runs its configuration")
    assert token() == first_value  # through Vector's $-expansion unchanged
    agent = await fleet.agent(agent_id)
    async with tenant_transaction(fleet.services.pool, SCOPE, fleet.tenant_id) as conn:
        stored = await fleet_artifacts.get_artifacts(
            conn,
            fleet.tenant_id,
            [agent.applied_artifact],  # type: ignore[list-item]
        )
    art = stored[agent.applied_artifact]  # type: ignore[index]
    assert art.secret_refs == ("API_TOKEN",)
    assert b"SECRET[strataplane.API_TOKEN]" in art.content
    assert b"quoted" not in art.content

    await secrets.set_secret(fleet.admin, "API_TOKEN", "v2", rotate=True)
    await fleet.until(lambda: _true(token() == "v2"), "the next poll brings the new version")
    polls = sim.polls
    await fleet.until(lambda: _true(sim.polls >= polls + 3), "more polls")
    rows = await _rows(
        fleet,
        "SELECT version, channel FROM secret_delivery WHERE tenant_id = %s "
        "AND agent_instance_id = %s ORDER BY id",
        UUID(agent_id),
    )
    # one row per version that reached the agent, not one per poll
    assert [(r["version"], r["channel"]) for r in rows] == [
        (1, "vector-config"),
        (2, "vector-config"),
    ]

    canary = await fleet.enroll("vec-s2", group="canary")  # no env label: the grant refuses
    headers = {
        "Authorization": f"Bearer {canary['credential']}",
        "User-Agent": "Vector/0.57.0 (x86_64-unknown-linux-gnu)",
    }
    reply = await fleet.pool.request("GET", "/agents/vector/config", headers)
    assert reply.status == 403
    assert json.loads(reply.body)["code"] == "secret.withheld"
    assert b"v2" not in reply.body
    withheld = await _rows(
        fleet,
        "SELECT details FROM audit_event WHERE tenant_id = %s AND action = 'secret.withhold' "
        "AND object_id = %s",
        canary["agent_id"],
    )
    assert withheld[0]["details"]["withheld"] == {"API_TOKEN": "grant"}
    assert withheld[0]["details"]["channel"] == "vector-config"


async def _true(value: bool) -> bool:
    return value


async def _rows(fleet: Fleet, query: str, *args: object) -> list[dict[str, Any]]:
    async with tenant_transaction(fleet.services.pool, SCOPE, fleet.tenant_id) as conn:
        cur = await conn.execute(query, (fleet.tenant_id, *args))
        return list(await cur.fetchall())  # type: ignore[arg-type]
