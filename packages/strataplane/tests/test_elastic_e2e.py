"""Elastic Agent end to end against the real served app (granian in its own process) with
simulated agents speaking the Fleet Server protocol: enroll, check in, a POLICY_CHANGE rendered
from the spec delivered and acknowledged (applied proven by the acknowledged revision), a new
revision delivered to a waiting check-in, a failing unit reported as degraded, re-enrollment
with and without the right replace token, unenroll, every kind served from one revision, and
hostile input refused with a 4xx in Fleet's error shape."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

import pytest
from platformkit.db.scope import tenant_transaction
from strataplane.actions import fleet_enrollment, fleet_inventory, secrets
from strataplane.actions.context import Ctx, Services
from strataplane.actions.fleet_errors import SettingsUnsupported
from strataplane.cli import app as cli
from strataplane.db import SCOPE
from strataplane.simulate.elastic import EqualJitter, SimulatedElasticAgent
from strataplane.simulate.http import HttpPool
from strataplane.simulate.seed import publish
from strataplane.simulate.telegraf import SimulatedTelegraf
from strataplane.simulate.vector import SimulatedVector
from strataplane.store import fleet_agents, fleet_artifacts
from strataplane.testing import Seed, assert_same_artifact
from strataplane.testing.served import platform_tenant, stop
from strataplane.testing.spec_files import (
    TELEGRAF_ROUTE,
    VECTOR_ROUTE,
    fleet_settings,
    telegraf_layer,
)
from typer.testing import CliRunner

pytestmark = pytest.mark.long_module  # minutes: run first (platformkit.testing.plugin)

LAYER = """agentKind = "elastic-agent"
owner = "platform"
routes = ["es"]

[config.inputs.system-metrics]
type = "{kind}"
use_output = "default"
"""
ROUTE = """agentKind = "elastic-agent"
owner = "platform"

[config.outputs.default]
type = "elasticsearch"
hosts = ["https://es.example.com:9200"]
"""
VECTOR_LAYER = """agentKind = "vector"
owner = "platform"
routes = ["out"]

[config.sources.app]
type = "file"
include = ["/var/log/app.log"]
"""
SETTINGS = fleet_settings("telegraf", "vector")
NUL, HUGE_INT = "\x00", 2**70


def tree(kind: str = "system/metrics") -> dict[str, str]:
    return {
        "layers/elastic.toml": LAYER.format(kind=kind),
        "routes/es.toml": ROUTE,
        "layers/vector.toml": VECTOR_LAYER,
        "routes/out.toml": VECTOR_ROUTE,
        "layers/telegraf.toml": telegraf_layer(),
        "routes/influx.toml": TELEGRAF_ROUTE,
        "settings.toml": SETTINGS,
    }


@pytest.fixture(scope="module")
def served_settings() -> dict[str, str]:
    return {"fleet_elastic_poll": "1"}


@dataclass
class Fleet:
    seed: Seed
    tenant_id: UUID
    admin: Ctx
    pool: HttpPool
    tokens: dict[str, str]
    slug: str
    tasks: list[asyncio.Task[None]] = field(default_factory=list)

    @property
    def services(self) -> Services:
        return self.seed.services

    async def enrolled(
        self, name: str, replace_token: str | None = "rt-" + "x" * 8, **kw: Any
    ) -> SimulatedElasticAgent:
        sim = SimulatedElasticAgent(
            self.pool,
            name,
            f"{name}.example.com",
            retry_delay=0.2,
            backoff=EqualJitter(0.2, 1.0),  # fleet.checkin.request_backoff_init / _max
            **kw,
        )
        status, answer = await sim.enroll(self.tokens["elastic-agent"], replace_token)
        assert status == 200, answer
        return sim

    def run(self, sim: Any) -> None:
        self.tasks.append(asyncio.create_task(sim.run()))

    async def agent(self, name: str, kind: str = "elastic-agent") -> fleet_agents.Agent:
        async with tenant_transaction(self.services.pool, SCOPE, self.tenant_id) as conn:
            found = await fleet_agents.find_agent(conn, self.tenant_id, kind, name)
        assert found is not None
        return found

    async def rows(self, sql: str, *args: Any) -> list[dict[str, Any]]:
        async with tenant_transaction(self.services.pool, SCOPE, self.tenant_id) as conn:
            cur = await conn.execute(sql, args)
            return list(await cur.fetchall())

    async def until(
        self, check: Callable[[], Awaitable[bool]], what: str, within: float = 120
    ) -> None:
        deadline = asyncio.get_running_loop().time() + within
        while not await check():
            assert asyncio.get_running_loop().time() < deadline, what
            await asyncio.sleep(0.2)

    async def in_sync_at(self, name: str, revision: int, kind: str = "elastic-agent") -> bool:
        a = await self.agent(name, kind)
        return a.sync == "in_sync" and a.applied_revision_id == revision


@pytest.fixture
async def fleet(served: str, served_seed: Seed) -> AsyncIterator[Fleet]:
    seed = served_seed
    tenant, _, admin_ctx = await platform_tenant(seed)
    tokens = {}
    for kind in ("elastic-agent", "vector", "telegraf"):
        made = await fleet_enrollment.create_enrollment_token(
            admin_ctx, kind, agent_kind=kind, labels={"env": "prod"}
        )
        tokens[kind] = made.plaintext
    http = HttpPool(served, size=20)
    f = Fleet(seed, tenant.id, admin_ctx, http, tokens, tenant.slug)
    yield f
    await stop(f.tasks)
    await http.close()


async def test_enroll_checkin_policy_change_acknowledged_then_a_new_revision(
    fleet: Fleet,
) -> None:
    first = await publish(fleet.services.pool, fleet.tenant_id, tree())
    sim = await fleet.enrolled("ea-1")
    assert sim.access_key is not None
    assert sim.access_key.startswith("spe_")
    fleet.run(sim)
    await fleet.until(lambda: fleet.in_sync_at("ea-1", first), "the acked policy proves r1")
    assert sim.policy is not None
    assert sim.policy["id"] == "strataplane"
    assert sim.policy["revision"] == 1
    assert sim.policy["inputs"] == [
        {"id": "system-metrics", "type": "system/metrics", "use_output": "default"}
    ]
    assert sim.policy["outputs"]["default"]["type"] == "elasticsearch"
    a = await fleet.agent("ea-1")
    assert a.health == "healthy"
    assert a.version == "8.15.0"
    assert a.served_artifact == a.desired_artifact == a.applied_artifact
    [action] = await fleet.rows(
        "SELECT type, policy_seq, acked_at IS NOT NULL AS acked, delivery_count "
        "FROM agent_action WHERE agent_instance_id = %s",
        a.id,
    )
    assert action["type"] == "POLICY_CHANGE"
    assert action["policy_seq"] == 1
    assert action["acked"]
    units = await fleet.rows(
        "SELECT component_id, unit_id, unit_type, state FROM agent_component "
        "WHERE agent_instance_id = %s ORDER BY unit_id",
        a.id,
    )
    assert {(u["unit_type"], u["state"]) for u in units} == {
        (None, "HEALTHY"),
        ("input", "HEALTHY"),
        ("output", "HEALTHY"),
    }

    second = await publish(fleet.services.pool, fleet.tenant_id, tree("system/logs"))
    await fleet.until(lambda: fleet.in_sync_at("ea-1", second), "the waiting check-in gets r2")
    assert sim.revision_idx == 2
    assert sim.policy["inputs"][0]["type"] == "system/logs"


async def test_a_failing_unit_is_reported_as_degraded(fleet: Fleet) -> None:
    revision = await publish(fleet.services.pool, fleet.tenant_id, tree("broken/metrics"))
    sim = await fleet.enrolled("ea-failing", failing=frozenset({"broken/metrics"}))
    fleet.run(sim)

    async def degraded() -> bool:
        a = await fleet.agent("ea-failing")
        return a.health == "degraded" and a.applied_revision_id == revision

    await fleet.until(degraded, "the failed unit shows")
    a = await fleet.agent("ea-failing")
    assert a.health_message is not None
    assert "FAILED" in a.health_message
    failed = await fleet.rows(
        "SELECT unit_id, message FROM agent_component WHERE agent_instance_id = %s "
        "AND state = 'FAILED' AND unit_type = 'input'",
        a.id,
    )
    assert [f["unit_id"] for f in failed] == ["broken/metrics-default-system-metrics"]


async def test_a_silent_agent_is_not_reporting_until_it_checks_in_again(fleet: Fleet) -> None:
    files = tree()
    files["settings.toml"] = SETTINGS + '\n[elastic-agent]\npollTimeout = "1s"\n'
    revision = await publish(fleet.services.pool, fleet.tenant_id, files)
    sim = await fleet.enrolled("ea-silent")
    fleet.run(sim)
    await fleet.until(lambda: fleet.in_sync_at("ea-silent", revision), "the agent runs r1")
    task = fleet.tasks.pop()
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)

    async def health_is(want: str) -> bool:
        return (await fleet.agent("ea-silent")).health == want

    # 3 report intervals: pollTimeout 1s, and the server holds a check-in at most 1 s
    await fleet.until(lambda: health_is("not_reporting"), "silence is noticed")
    a = await fleet.agent("ea-silent")
    assert a.health_message == "no report for 3 check-in intervals"
    fleet.run(sim)
    await fleet.until(lambda: health_is("healthy"), "the next check-in reports again")
    events = await fleet.rows(
        "SELECT from_value, to_value FROM agent_status_event WHERE agent_instance_id = %s "
        "AND field = 'health' ORDER BY id",
        a.id,
    )
    assert [(e["from_value"], e["to_value"]) for e in events][-2:] == [
        ("healthy", "not_reporting"),
        ("not_reporting", "healthy"),
    ]


async def test_reenrollment_needs_the_same_replace_token(fleet: Fleet) -> None:
    await publish(fleet.services.pool, fleet.tenant_id, tree())
    sim = await fleet.enrolled("ea-replace", replace_token="token-one")
    old_key = sim.access_key
    for wrong in ("token-two", None):
        status, answer = await sim.enroll(fleet.tokens["elastic-agent"], wrong)
        assert status == 403, answer
        assert answer == {
            "statusCode": 403,
            "error": "AgentNotReplaceable",
            "message": "existing agent cannot be replaced",
        }
    assert sim.access_key == old_key  # refused: the old key stays valid
    status, _ = await sim.checkin()
    assert status == 200
    status, answer = await sim.enroll(fleet.tokens["elastic-agent"], "token-one")
    assert status == 200, answer
    assert sim.access_key != old_key
    # the replaced agent's key is revoked: the same instance, a new key
    stale = SimulatedElasticAgent(fleet.pool, "ea-replace", "ea-replace.example.com")
    stale.access_key = old_key
    # every replica drops the revoked key on its NOTIFY, moments after the commit
    deadline = asyncio.get_running_loop().time() + 60
    while (reply := await stale.checkin())[0] != 401:
        assert asyncio.get_running_loop().time() < deadline, reply
        await asyncio.sleep(0.1)
    status, answer = reply
    assert answer["statusCode"] == 401
    assert answer["error"] == "Unauthorized"
    # an agent enrolled without a replace token cannot be replaced at all
    await fleet.enrolled("ea-noreplace", replace_token=None)
    again = SimulatedElasticAgent(fleet.pool, "ea-noreplace", "ea-noreplace.example.com")
    status, answer = await again.enroll(fleet.tokens["elastic-agent"], "anything")
    assert status == 403
    assert answer["error"] == "AgentNotReplaceable"


async def test_unenroll_is_delivered_acknowledged_and_revokes_the_key(fleet: Fleet) -> None:
    first = await publish(fleet.services.pool, fleet.tenant_id, tree())
    sim = await fleet.enrolled("ea-gone")
    fleet.run(sim)
    await fleet.until(lambda: fleet.in_sync_at("ea-gone", first), "the agent runs r1")
    a = await fleet.agent("ea-gone")
    await fleet_inventory.unenroll_agent(fleet.admin, a.id)

    async def unenrolled() -> bool:
        return sim.state == "unenrolled"

    await fleet.until(unenrolled, "the agent receives UNENROLL")

    async def refused() -> bool:  # its key is revoked at the ack; replicas learn by NOTIFY
        return (await sim.checkin())[0] == 401

    await fleet.until(refused, "the unenrolled agent's key is refused")
    [row] = await fleet.rows(
        "SELECT acked_at IS NOT NULL AS acked FROM agent_action WHERE agent_instance_id = %s "
        "AND type = 'UNENROLL'",
        a.id,
    )
    assert row["acked"]


async def test_a_settings_action_changes_the_log_level(fleet: Fleet) -> None:
    first = await publish(fleet.services.pool, fleet.tenant_id, tree())
    sim = await fleet.enrolled("ea-settings")
    fleet.run(sim)
    await fleet.until(lambda: fleet.in_sync_at("ea-settings", first), "the agent runs r1")
    a = await fleet.agent("ea-settings")
    assert a.facts["log_level"] == "info"
    # two in a row while the agent is away: only the newer one is delivered
    task = fleet.tasks.pop()
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    await asyncio.sleep(2)  # its last check-in, held 1 s by this server, has ended
    await fleet_inventory.change_agent_settings(fleet.admin, a.id, "warning")
    await fleet_inventory.change_agent_settings(fleet.admin, a.id, "debug")
    fleet.run(sim)

    async def reported() -> bool:
        return (await fleet.agent("ea-settings")).facts.get("log_level") == "debug"

    await fleet.until(reported, "the check-in gets SETTINGS; the next one reports it")
    assert sim.log_level == "debug"
    rows = await fleet.rows(
        "SELECT data, acked_at IS NOT NULL AS acked, superseded_by IS NOT NULL AS superseded, "
        "delivery_count FROM agent_action WHERE agent_instance_id = %s AND type = 'SETTINGS' "
        "ORDER BY created_at",
        a.id,
    )
    assert [(r["data"], r["acked"], r["superseded"], r["delivery_count"]) for r in rows] == [
        ({"log_level": "warning"}, False, True, 0),
        ({"log_level": "debug"}, True, False, 1),
    ]
    body = json.dumps({"instance_id": "tg-settings", "hostname": "tg.example.com"}).encode()
    reply = await fleet.pool.request(
        "POST",
        "/api/v1/enroll/telegraf",
        {"Authorization": f"Bearer {fleet.tokens['telegraf']}", "Content-Type": "application/json"},
        body,
    )
    assert reply.status == 201, reply.body
    telegraf = await fleet.agent("tg-settings", "telegraf")
    with pytest.raises(SettingsUnsupported):
        await fleet_inventory.change_agent_settings(fleet.admin, telegraf.id, "debug")


async def test_every_kind_is_served_from_one_revision_and_explained(
    fleet: Fleet, served_database: str
) -> None:
    revision = await publish(fleet.services.pool, fleet.tenant_id, tree())
    body = json.dumps({"instance_id": "mix", "hostname": "mix.example.com"}).encode()
    enrolled = {}
    for kind in ("vector", "telegraf"):
        reply = await fleet.pool.request(
            "POST",
            f"/api/v1/enroll/{kind}",
            {"Authorization": f"Bearer {fleet.tokens[kind]}", "Content-Type": "application/json"},
            body,
        )
        assert reply.status == 201, reply.body
        enrolled[kind] = json.loads(reply.body)
    fleet.run(
        SimulatedVector(
            fleet.pool,
            "/agents/vector/config",
            dict(enrolled["vector"]["environment"]),
            poll_interval=0.3,
            retry_delay=0.2,
            retries=20,
        )
    )
    fleet.run(
        SimulatedTelegraf(
            fleet.pool,
            "/agents/telegraf/config",
            dict(enrolled["telegraf"]["environment"]),
            watch_interval=0.3,
            retry_delay=0.2,
        )
    )
    fleet.run(await fleet.enrolled("mix"))

    async def all_three() -> bool:
        found = [
            await fleet.in_sync_at("mix", revision, k)
            for k in ("elastic-agent", "vector", "telegraf")
        ]
        return all(found)

    await fleet.until(all_three, "the three kinds prove one revision")
    artifacts = {
        (await fleet.agent("mix", k)).applied_artifact
        for k in ("elastic-agent", "vector", "telegraf")
    }
    assert len(artifacts) == 3

    # `strataplane explain` for each kind; "mix" names three agents, so --kind chooses. Asked
    # from a shell where another agent URL is configured, as an operator's may be.
    def explain(*args: str) -> Any:
        command = ["explain", "mix", "--tenant", fleet.slug, "--database-url", served_database]
        elsewhere = {"STRATAPLANE_FLEET_AGENT_URL": "http://elsewhere.example.com:1"}
        return CliRunner().invoke(cli, [*command, *args], env=elsewhere)

    ambiguous = await asyncio.to_thread(explain)
    assert ambiguous.exit_code != 0
    assert "add --kind" in " ".join(ambiguous.output.replace("\u2502", " ").split())
    for kind, layer, value in (
        ("elastic-agent", "layers/elastic.toml", "inputs.system-metrics.type"),
        ("vector", "layers/vector.toml", "sources.app.type"),
        ("telegraf", "layers/telegraf.toml", "inputs.cpu.default.percpu"),
    ):
        result = await asyncio.to_thread(explain, "--kind", kind)
        assert result.exit_code == 0, result.output
        out = json.loads(result.stdout)
        a = await fleet.agent("mix", kind)
        assert out["agent"]["kind"] == kind
        assert out["render"]["layers"] == [layer]
        assert out["render"]["values"][value]["layer"] == layer
        assert out["desired"]["artifact"] == a.desired_artifact.hex()
        assert out["render"]["artifact"] is not None
        rendered = bytes.fromhex(out["render"]["artifact"])
        await assert_same_artifact(
            fleet.services, fleet.tenant_id, rendered, a.desired_artifact, out["render"]["content"]
        )
        assert out["applied"]["revision"] == revision
    elastic = json.loads((await asyncio.to_thread(explain, "--kind", "elastic-agent")).stdout)
    assert elastic["elastic"]["policy"]["policy_seq"] == 1
    assert elastic["elastic"]["policy"]["acked_at"] is not None
    assert elastic["elastic"]["pending_actions"] == []
    assert {c["state"] for c in elastic["elastic"]["components"]} == {"HEALTHY"}


def _deep(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


async def test_hostile_input_is_refused_in_fleet_shape(fleet: Fleet) -> None:
    await publish(fleet.services.pool, fleet.tenant_id, tree())
    sim = await fleet.enrolled("ea-hostile")
    assert sim.access_key is not None
    enroll_key = {
        "Authorization": f"ApiKey {fleet.tokens['elastic-agent']}",
        "Content-Type": "application/json",
    }
    key = {"Authorization": f"ApiKey {sim.access_key}", "Content-Type": "application/json"}
    checkin = "/api/fleet/agents/ea-hostile/checkin"
    meta = {"local": {"host": {"hostname": "h.example.com"}}}
    cases: list[tuple[str, dict[str, str], bytes, int]] = [
        (
            "/api/fleet/agents/enroll",
            enroll_key,
            json.dumps({"id": NUL, "metadata": meta}).encode(),
            400,
        ),
        (
            "/api/fleet/agents/enroll",
            enroll_key,
            json.dumps({"id": "x", "replace_token": NUL, "metadata": meta}).encode(),
            400,
        ),
        (
            "/api/fleet/agents/enroll",
            enroll_key,
            json.dumps({"id": HUGE_INT, "metadata": meta}).encode(),
            400,
        ),
        (
            "/api/fleet/agents/enroll",
            enroll_key,
            json.dumps({"id": "x", "metadata": {}}).encode(),
            400,
        ),
        ("/api/fleet/agents/enroll", enroll_key, _deep(100), 400),
        ("/api/fleet/agents/enroll", enroll_key, b"{" + b" " * (2 << 20) + b"}", 413),
        (
            "/api/fleet/agents/enroll",
            {"Authorization": "ApiKey nope"},
            json.dumps({"id": "x", "metadata": meta}).encode(),
            401,
        ),
        (
            checkin,
            key,
            json.dumps({"status": "online", "policy_revision_idx": HUGE_INT}).encode(),
            400,
        ),
        (checkin, key, json.dumps({"status": NUL}).encode(), 400),
        (
            checkin,
            key,
            json.dumps(
                {"status": "online", "message": NUL, "components": [{"id": NUL, "status": "BOGUS"}]}
            ).encode(),
            400,
        ),
        (checkin, key, _deep(100), 400),
        (checkin, key, b"\xff\x00", 400),
        (checkin, key, b"{" + b" " * (2 << 20) + b"}", 413),
        ("/api/fleet/agents/someone-else/checkin", key, b'{"status": "online"}', 403),
        (
            "/api/fleet/agents/ea-hostile/acks",
            key,
            json.dumps({"events": [{"action_id": NUL}]}).encode(),
            200,
        ),
        ("/api/fleet/agents/ea-hostile/acks", key, json.dumps({"events": HUGE_INT}).encode(), 400),
    ]
    for path, headers, body, status in cases:
        reply = await fleet.pool.request("POST", path, headers, body)
        assert reply.status == status, (path, body[:60], reply.status, reply.body[:300])
        answer = json.loads(reply.body)
        if status >= 400:
            assert answer["statusCode"] == status
            assert isinstance(answer["error"], str)
            assert isinstance(answer["message"], str)
    # a NUL in a message the agent reports is stored replaced, never a 500
    reply = await fleet.pool.request(
        "POST", checkin, key, json.dumps({"status": "degraded", "message": "a" + NUL}).encode()
    )
    assert reply.status == 200, reply.body


SECRET = 'owner = "platform"\n\n[grant]\nmatchLabels = {{ env = "{env}" }}\n'


def secret_tree(env: str) -> dict[str, str]:
    route = ROUTE + 'api_key = "secret://ES_KEY"\n'
    return {**tree(), "routes/es.toml": route, "secrets/ES_KEY.toml": SECRET.format(env=env)}


async def test_a_policy_gets_its_secret_at_delivery_only_for_an_admitted_agent(
    fleet: Fleet,
) -> None:
    """As Fleet Server: the stored policy holds a reference, the POLICY_CHANGE the value and
    secret_paths. While the grant withholds the value the check-in is refused (403) and the
    action stays pending; once the grant admits the agent, the next check-in delivers it."""
    await publish(fleet.services.pool, fleet.tenant_id, secret_tree("staging"))
    await secrets.set_secret(fleet.admin, "ES_KEY", "es-key-value")
    sim = await fleet.enrolled("ea-secret")
    fleet.run(sim)

    async def withheld() -> bool:
        found = await fleet.rows(
            "SELECT details FROM audit_event WHERE action = 'secret.withhold' "
            "AND details->>'channel' = 'elastic-policy'"
        )
        return bool(found)

    await fleet.until(withheld, "the grant withholds the key")
    assert sim.policy is None
    second = await publish(fleet.services.pool, fleet.tenant_id, secret_tree("prod"))
    await fleet.until(lambda: fleet.in_sync_at("ea-secret", second), "delivered once admitted")
    assert sim.policy is not None
    assert sim.policy["outputs"]["default"]["api_key"] == "es-key-value"
    assert sim.policy["secret_paths"] == ["outputs.default.api_key"]
    a = await fleet.agent("ea-secret")
    async with tenant_transaction(fleet.services.pool, SCOPE, fleet.tenant_id) as conn:
        stored = await fleet_artifacts.get_artifacts(
            conn,
            fleet.tenant_id,
            [a.applied_artifact],  # type: ignore[list-item]
        )
    art = stored[a.applied_artifact]  # type: ignore[index]
    assert art.secret_refs == ("ES_KEY",)
    assert b"$co.elastic.secret{ES_KEY}" in art.content
    assert b"es-key-value" not in art.content
    rows = await fleet.rows(
        "SELECT version, channel FROM secret_delivery WHERE agent_instance_id = %s", a.id
    )
    assert [(r["version"], r["channel"]) for r in rows] == [(1, "elastic-policy")]

    # a rotation reaches the running agent without a policy change: the policy is sent again,
    # with the new value, in a new POLICY_CHANGE the agent acknowledges
    before = sim.revision_idx
    await secrets.set_secret(fleet.admin, "ES_KEY", "es-key-rotated")

    async def rotated() -> bool:
        latest = await fleet.rows(
            "SELECT acked_at IS NOT NULL AS acked FROM agent_action WHERE agent_instance_id = %s "
            "AND type = 'POLICY_CHANGE' AND policy_seq > %s",
            a.id,
            before,
        )
        return bool(latest) and latest[-1]["acked"]

    await fleet.until(rotated, "the policy sent again with the new value and acknowledged")
    assert sim.policy["outputs"]["default"]["api_key"] == "es-key-rotated"
    assert sim.revision_idx > before
    await fleet.until(lambda: fleet.in_sync_at("ea-secret", second), "the new policy proven")
    rows = await fleet.rows(
        "SELECT DISTINCT version FROM secret_delivery WHERE agent_instance_id = %s "
        "ORDER BY version",
        a.id,
    )
    assert [r["version"] for r in rows] == [1, 2]
