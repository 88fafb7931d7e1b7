"""Secret delivery end to end against the real served app (granian in its own process): a
simulated Telegraf fetches its ``secretstores.http`` over HTTP as Telegraf does; each delivery
is a secret_delivery row; a new version reaches a running agent without a spec change; a key
the grant withholds makes the agent exit as Telegraf does (not found), audited; a revoked
credential gets 401; validation reports a reference to a Secret without a value (SP-4015) and
an agent the grant excludes (SP-5006)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any
from uuid import UUID

import pytest
from platformkit.db.scope import tenant_transaction
from strataplane.actions import change_sets, fleet_enrollment, secrets, spec, validation
from strataplane.actions.context import Ctx, Services
from strataplane.db import SCOPE
from strataplane.simulate.http import HttpPool
from strataplane.simulate.seed import publish
from strataplane.simulate.telegraf import SimulatedTelegraf
from strataplane.testing import Seed
from strataplane.testing.served import enroll
from strataplane.testing.spec_files import fleet_settings, telegraf_layer

LAYER = telegraf_layer()
ROUTE = (
    'agentKind = "telegraf"\nowner = "platform"\n\n[config.outputs.influxdb_v2.main]\n'
    'urls = ["https://influx.example.com"]\ntoken = "secret://{name}"\n'
)
SECRET = 'owner = "platform"\n\n[grant]\nmatchLabels = {{ env = "{env}" }}\n'


def tree(name: str = "INFLUX_TOKEN", env: str = "prod") -> dict[str, str]:
    return {
        "layers/base.toml": LAYER,
        "routes/influx.toml": ROUTE.replace("{name}", name),
        f"secrets/{name}.toml": SECRET.format(env=env),
        "settings.toml": fleet_settings("telegraf"),
    }


@dataclass
class Fleet:
    services: Services
    ctx: Ctx
    tenant_id: UUID
    pool: HttpPool
    enroll_token: str

    async def enroll(self, name: str) -> dict[str, Any]:
        return await enroll(self.pool, self.enroll_token, name)

    def telegraf(self, enrolled: dict[str, Any]) -> SimulatedTelegraf:
        env = dict(enrolled["environment"])
        return SimulatedTelegraf(
            self.pool, "/agents/telegraf/config", env, watch_interval=0.3, retry_delay=0.1
        )

    async def rows(self, query: str, *args: object) -> list[dict[str, Any]]:
        async with tenant_transaction(self.services.pool, SCOPE, self.tenant_id) as conn:
            cur = await conn.execute(query, (self.tenant_id, *args))
            return list(await cur.fetchall())


async def until(check: Any, within: float = 60, sim: SimulatedTelegraf | None = None) -> None:
    deadline = asyncio.get_running_loop().time() + within
    while not check():
        where = (sim.state, sim.exit_reason, sim.secrets, sim.reloads) if sim else None
        assert asyncio.get_running_loop().time() < deadline, where
        await asyncio.sleep(0.1)


@pytest.fixture
async def fleet(served: str, served_seed: Seed) -> AsyncIterator[Fleet]:
    tenant, admin = await served_seed.tenant()
    ctx = served_seed.ctx(admin, tenant.id)
    created = await fleet_enrollment.create_enrollment_token(ctx, "prod", labels={"env": "prod"})
    pool = HttpPool(served, size=10)
    yield Fleet(served_seed.services, ctx, tenant.id, pool, created.plaintext)
    await pool.close()


async def _running(sim: SimulatedTelegraf) -> asyncio.Task[None]:
    task = asyncio.create_task(sim.run())
    await until(lambda: sim.state != "new")
    return task


async def test_fetch_record_rotate_without_a_spec_change(fleet: Fleet) -> None:
    revision = await publish(fleet.services.pool, fleet.tenant_id, tree())
    await secrets.set_secret(fleet.ctx, "INFLUX_TOKEN", "first-value")
    enrolled = await fleet.enroll("web-1")
    sim = fleet.telegraf(enrolled)
    task = await _running(sim)
    try:
        await until(lambda: sim.secrets == {"INFLUX_TOKEN": "first-value"}, sim=sim)
        assert sim.state == "running"
        delivered = await fleet.rows(
            "SELECT secret_name, version, channel, assurance::text AS a, agent_instance_id "
            "FROM secret_delivery WHERE tenant_id = %s"
        )
        assert [(d["secret_name"], d["version"], d["channel"], d["a"]) for d in delivered] == [
            ("INFLUX_TOKEN", 1, "telegraf-secretstore", "low")
        ]
        assert str(delivered[0]["agent_instance_id"]) == enrolled["agent_id"]
        # Telegraf's watcher compares with the Last-Modified of its first tick: rotate after it
        await until(lambda: len(sim.baselines) == 1, sim=sim)
        await secrets.set_secret(fleet.ctx, "INFLUX_TOKEN", "second-value", rotate=True)
        await until(lambda: sim.secrets == {"INFLUX_TOKEN": "second-value"}, sim=sim)
        assert sim.reloads >= 1
        assert sim.state == "running"
        revisions = await fleet.rows("SELECT max(id) AS n FROM spec_revision WHERE tenant_id = %s")
        assert revisions[0]["n"] == revision  # no spec change
        versions = await fleet.rows(
            "SELECT version FROM secret_delivery WHERE tenant_id = %s ORDER BY id"
        )
        assert [v["version"] for v in versions][-1] == 2
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_a_withheld_key_stops_the_agent_as_telegraf_does(fleet: Fleet) -> None:
    await publish(fleet.services.pool, fleet.tenant_id, tree(name="STAGING_TOKEN", env="staging"))
    await secrets.set_secret(fleet.ctx, "STAGING_TOKEN", "not-for-prod")
    sim = fleet.telegraf(await fleet.enroll("web-2"))
    task = await _running(sim)
    try:
        await until(lambda: sim.state == "exited")
        assert sim.exit_reason is not None
        assert "not found" in sim.exit_reason
        assert sim.secrets == {}
        events = await fleet.rows(
            "SELECT details FROM audit_event WHERE tenant_id = %s AND action = 'secret.withhold'"
        )
        assert events
        assert events[-1]["details"]["withheld"] == {"STAGING_TOKEN": "grant"}
        assert "not-for-prod" not in json.dumps([e["details"] for e in events])
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_a_revoked_credential_gets_nothing(fleet: Fleet) -> None:
    await publish(fleet.services.pool, fleet.tenant_id, tree())
    await secrets.set_secret(fleet.ctx, "INFLUX_TOKEN", "the-value")
    first = await fleet.enroll("web-3")
    bearer = {"Authorization": f"Bearer {first['credential']}"}
    config = await fleet.pool.request("GET", "/agents/telegraf/config", bearer)
    assert config.status == 200
    reply = await fleet.pool.request("GET", "/agents/telegraf/secrets", bearer)
    assert reply.status == 200
    assert json.loads(reply.body) == {"INFLUX_TOKEN": "the-value"}
    await fleet.enroll("web-3")  # enrolling again revokes the first credential
    deadline = asyncio.get_running_loop().time() + 30
    while (await fleet.pool.request("GET", "/agents/telegraf/secrets", bearer)).status != 401:
        assert asyncio.get_running_loop().time() < deadline
        await asyncio.sleep(0.05)
    refused = await fleet.pool.request("GET", "/agents/telegraf/secrets", bearer)
    assert refused.status == 401
    assert b"the-value" not in refused.body
    for header in ("", "Bearer spt_" + "a" * 52, "Basic Zm9vOmJhcg=="):
        bad = await fleet.pool.request("GET", "/agents/telegraf/secrets", {"Authorization": header})
        assert bad.status == 401


async def test_another_tenants_agent_never_gets_this_tenants_secret(
    fleet: Fleet, served_seed: Seed, served: str
) -> None:
    await publish(fleet.services.pool, fleet.tenant_id, tree())
    await secrets.set_secret(fleet.ctx, "INFLUX_TOKEN", "tenant-a-value")
    other, admin = await served_seed.tenant()
    other_ctx = served_seed.ctx(admin, other.id)
    made = await fleet_enrollment.create_enrollment_token(other_ctx, "p", labels={"env": "prod"})
    await publish(fleet.services.pool, other.id, tree())  # same names, no value in tenant B
    intruder = Fleet(fleet.services, other_ctx, other.id, fleet.pool, made.plaintext)
    sim = intruder.telegraf(await intruder.enroll("web-b"))
    task = await _running(sim)
    try:
        await until(lambda: sim.state == "exited")
        assert sim.secrets == {}
        assert "not found" in (sim.exit_reason or "")
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_validation_names_the_missing_value_and_the_excluded_agent(fleet: Fleet) -> None:
    base = {k: v for k, v in tree().items() if not k.startswith("routes/")}
    base["layers/base.toml"] = base["layers/base.toml"].replace('routes = ["influx"]\n', "")
    await publish(fleet.services.pool, fleet.tenant_id, base)
    await fleet.enroll("web-5")
    cs = await change_sets.create_change_set(fleet.ctx, "use the token")
    edits = {
        "routes/influx.toml": ROUTE.replace("{name}", "INFLUX_TOKEN"),
        "layers/base.toml": LAYER,
        "secrets/INFLUX_TOKEN.toml": SECRET.format(env="staging"),
    }
    for path, content in edits.items():
        edit = await spec.write_file(fleet.ctx, cs.id, path, content.encode(), seen=cs.digest)
        cs = edit.change_set
    op, _ = await validation.request_validation(fleet.ctx, cs.id)
    await validation.run_validation(
        fleet.services.pool, validation.params_for(op, fleet.ctx.principal)
    )
    doc = (await change_sets.access_change_set(fleet.ctx, cs.id)).validation
    assert doc is not None
    codes = {(d["code"], d["path"]) for d in doc["diagnostics"]}
    assert ("SP-4015", "routes/influx.toml") in codes
    assert ("SP-5006", "secrets/INFLUX_TOKEN.toml") in codes
    assert doc["ok"] is False
    message = next(d["message"] for d in doc["diagnostics"] if d["code"] == "SP-4015")
    assert "strataplane secrets set INFLUX_TOKEN" in message
