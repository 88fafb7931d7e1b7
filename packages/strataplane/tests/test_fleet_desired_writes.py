"""Desired-state writers on real PostgreSQL: a writer renders with the agent's inputs as they
stand once it holds the agent's row, so a render from inputs read before another transaction
changed them (the reconciler's batch read before an agent reported its version) never
overwrites that transaction's own render."""

from __future__ import annotations

from uuid import UUID

from platformkit.db.scope import tenant_transaction
from strataplane.actions import teams
from strataplane.actions.fleet_desired import refresh_agents, render_and_write
from strataplane.db import SCOPE
from strataplane.simulate.seed import publish, seed_fleet
from strataplane.store import fleet_agents, fleet_artifacts, fleet_serving
from strataplane.store.fleet_desired import render_inputs
from strataplane.testing import Seed

URL = "http://127.0.0.1:1"
FILES = {
    "routes/influx.toml": 'agentKind = "telegraf"\nowner = "platform"\n\n'
    '[config.outputs.influxdb_v2.main]\nurls = ["https://influx.example.com"]\n',
    "layers/base.toml": 'agentKind = "telegraf"\nowner = "platform"\nroutes = ["influx"]\n\n'
    "[config.inputs.cpu.default]\npercpu = true\n",
}


async def _desired_text(sp_seed: Seed, tid: UUID, agent: UUID) -> str:
    async with tenant_transaction(sp_seed.services.pool, SCOPE, tid) as conn:
        found = await fleet_agents.get_agent(conn, tid, agent)
        assert found is not None
        assert found.desired_artifact is not None
        stored = await fleet_artifacts.get_artifacts(conn, tid, [found.desired_artifact])
    return stored[found.desired_artifact].content.decode()


async def test_a_render_from_inputs_read_before_a_version_change_does_not_overwrite_it(
    sp_seed: Seed,
) -> None:
    t, admin = await sp_seed.tenant()
    await teams.create_team(sp_seed.ctx(admin, t.id), "platform", "Platform")
    pool, tid = sp_seed.services.pool, t.id
    revision = await publish(pool, tid, FILES)
    [(agent, _, _)] = await seed_fleet(pool, tid, 1, [{"env": "prod"}], version="1.37.3")
    async with tenant_transaction(pool, SCOPE, tid) as conn:
        await refresh_agents(conn, tid, [agent], URL)
    assert 'token = "${INFLUX_TOKEN}"' in await _desired_text(sp_seed, tid, agent)

    async with tenant_transaction(pool, SCOPE, tid) as writer:
        [read] = await render_inputs(writer, tid, agent_ids=[agent])  # version 1.37.3
        # meanwhile a config request reports Telegraf 1.39.1 and is rendered for at once
        async with tenant_transaction(pool, SCOPE, tid) as conn:
            assert await fleet_serving.set_version(conn, tid, agent, "1.39.1", "1.39.1")
            await refresh_agents(conn, tid, [agent], URL)
        await render_and_write(writer, tid, [read], revision, URL)

    text = await _desired_text(sp_seed, tid, agent)
    assert 'token = "${TELEGRAF_CONTROLLER_TOKEN}"' in text
    assert '"logs", "status"' in text
