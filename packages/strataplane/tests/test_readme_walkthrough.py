"""The files the README's strataplane walk-through shows are real: taken from README.md as
written, they pass a change set's validation (every level, the Telegraf catalog included) and
render a configuration the simulated Telegraf of every catalogued version runs. A README edit
that breaks them fails here."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from platformkit.db.scope import tenant_transaction
from strataplane.actions import change_sets, spec, teams, validation
from strataplane.actions.fleet_desired import refresh_agents
from strataplane.db import SCOPE
from strataplane.simulate.seed import publish, seed_fleet
from strataplane.simulate.telegraf_load import startup_error
from strataplane.store import fleet_agents, fleet_artifacts
from strataplane.testing import Seed

README = Path(__file__).resolve().parents[3] / "README.md"
_FILE = re.compile(r"^`[^`]+`, stored as `([^`]+)`:\n\n```toml\n(.*?)```$", re.M | re.S)


def walkthrough_files() -> dict[str, str]:
    text = README.read_text(encoding="utf-8")
    start = text.index("## strataplane")
    section = text[start : text.index("\n## ", start + 1)]
    return dict(_FILE.findall(section))


def test_the_readme_shows_a_layer_and_a_route() -> None:
    files = walkthrough_files()
    assert sorted(files) == ["layers/base.toml", "routes/influx.toml"]
    layer = tomllib.loads(files["layers/base.toml"])
    assert layer["routes"] == ["influx"]


async def test_the_readme_files_validate_and_run(sp_seed: Seed) -> None:
    tenant, admin = await sp_seed.tenant()
    ctx = sp_seed.ctx(admin, tenant.id)
    await teams.create_team(ctx, "platform", "Platform")
    pool = sp_seed.services.pool
    files = walkthrough_files()
    cs = await change_sets.create_change_set(ctx, "Base layer")
    for path, content in files.items():
        cs = (await spec.write_file(ctx, cs.id, path, content.encode(), seen=cs.digest)).change_set
    versions = ("1.37.3", "1.38.4", "1.39.1")
    agents = [
        (await seed_fleet(pool, tenant.id, 1, [{"env": "prod"}], version=v, prefix=f"v{v}"))[0][0]
        for v in versions
    ]
    op, _ = await validation.request_validation(ctx, cs.id)
    await validation.run_validation(pool, validation.params_for(op, ctx.principal))
    cs = await change_sets.access_change_set(ctx, cs.id)
    assert cs.validation is not None
    problems = [d for d in cs.validation["diagnostics"] if d["severity"] != "info"]
    assert problems == []
    assert cs.validated

    await publish(pool, tenant.id, files)
    async with tenant_transaction(pool, SCOPE, tenant.id) as conn:
        await refresh_agents(conn, tenant.id, agents, "http://127.0.0.1:7800")
        found = [await fleet_agents.get_agent(conn, tenant.id, a) for a in agents]
        digests = [a.desired_artifact for a in found if a is not None and a.desired_artifact]
        arts = await fleet_artifacts.get_artifacts(conn, tenant.id, digests)
    assert len(digests) == len(versions)
    for agent, version in zip(found, versions, strict=True):
        assert agent is not None
        assert agent.desired_artifact is not None
        rendered = tomllib.loads(arts[agent.desired_artifact].content.decode())
        assert startup_error(rendered, version) is None
        assert rendered["outputs"]["influxdb_v2"][0]["bucket"] == "telegraf"
