"""The catalog on real PostgreSQL: the shipped bundles are imported, an unsigned or tampered
bundle is refused, and a change set whose Telegraf configuration Telegraf would refuse stops
at validation with diagnostics naming the file, line, plugin, option and fix; a render that
fails a version's schema, or that Telegraf's loader refuses (level ``sandbox``, the simulated
loader standing in for the binary), never becomes that version's desired artifact."""

from __future__ import annotations

import base64
import hashlib
import json
from typing import Any
from uuid import UUID

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from platformkit.db.scope import tenant_transaction
from strataplane import errors
from strataplane.actions import catalog, change_sets, reviews, spec, teams, validation
from strataplane.actions.change_sets import NotValidated
from strataplane.actions.context import Ctx
from strataplane.actions.fleet_desired import refresh_agents
from strataplane.db import SCOPE
from strataplane.simulate.seed import publish, seed_fleet
from strataplane.store import catalog as store
from strataplane.store import fleet_agents
from strataplane.store.change_sets import ChangeSet
from strataplane.testing import Seed

ROUTE = (
    'agentKind = "telegraf"\nowner = "platform"\n\n'
    '[config.outputs.influxdb_v2.main]\nurls = ["https://influx.example.com"]\n'
)


def layer(body: str, versions: str | None = None) -> str:
    head = 'agentKind = "telegraf"\nowner = "platform"\nroutes = ["influx"]\n'
    if versions:
        head += f'agentVersions = "{versions}"\n'
    return head + "\n" + body


async def tenant(sp_seed: Seed) -> tuple[Ctx, Ctx]:
    t, admin = await sp_seed.tenant()
    admin_ctx = sp_seed.ctx(admin, t.id)
    await teams.create_team(admin_ctx, "platform", "Platform")
    author = await sp_seed.member(admin_ctx, "author")
    return admin_ctx, sp_seed.ctx(author, t.id)


async def validated(ctx: Ctx, pool: Any, files: dict[str, str]) -> ChangeSet:
    cs = await change_sets.create_change_set(ctx, "change")
    for path, content in files.items():
        cs = (await spec.write_file(ctx, cs.id, path, content.encode(), seen=cs.digest)).change_set
    op, _ = await validation.request_validation(ctx, cs.id)
    await validation.run_validation(pool, validation.params_for(op, ctx.principal))
    return await change_sets.access_change_set(ctx, cs.id)


def diagnostics(cs: ChangeSet, code: str) -> list[dict[str, Any]]:
    assert cs.validation is not None
    return [d for d in cs.validation["diagnostics"] if d["code"] == code]


async def test_the_shipped_bundles_are_imported_and_others_need_a_trusted_key(
    sp_seed: Seed,
) -> None:
    admin = await sp_seed.user(platform_admin=True)
    ctx = sp_seed.ctx(admin, None)
    rows = await catalog.list_bundles(ctx, "telegraf")
    assert [r.version for r in rows] == ["1.37.3", "1.38.4", "1.39.3"]
    async with tenant_transaction(sp_seed.services.pool, SCOPE, UUID(int=0)) as conn:
        cpu = await store.get_plugin_schema(conn, "telegraf", "1.39.3", "inputs", "cpu")
    assert cpu is not None
    assert "percpu" in cpu["properties"]

    body = json.dumps(
        {"format": 1, "agentKind": "telegraf", "version": "1.40.0", "source": "x", "plugins": {}}
    ).encode()
    stranger = Ed25519PrivateKey.generate()
    sig = base64.b64encode(stranger.sign(hashlib.sha256(body).digest())).decode()
    with pytest.raises(errors.CatalogUntrusted):
        await catalog.import_bundle(ctx, body, sig)
    _, shipped_sig = catalog.shipped_bundles()[0]
    with pytest.raises(errors.CatalogUntrusted):  # a shipped signature over other bytes
        await catalog.import_bundle(ctx, body, shipped_sig.read_text())
    someone = await sp_seed.user()
    with pytest.raises(errors.PlatformAdminRequired):
        await catalog.import_bundle(sp_seed.ctx(someone, None), body, sig)


async def test_telegraf_mistakes_stop_the_change_set_naming_file_line_and_fix(
    sp_seed: Seed,
) -> None:
    _, author = await tenant(sp_seed)
    pool = sp_seed.services.pool
    cs = await validated(
        author,
        pool,
        {
            "routes/influx.toml": ROUTE,
            "layers/typo.toml": layer('[config.inputs.cpuu.default]\npercpuu = "yes"\n'),
            "layers/option.toml": layer("[config.inputs.cpu.default]\npercpuu = true\n"),
            "layers/types.toml": layer('[config.inputs.cpu.default]\npercpu = "yes"\n'),
            "layers/removed.toml": layer(
                '[config.inputs.gnmi.default]\naddresses = ["r1:57400"]\ndump_responses = true\n',
                versions=">=1.39",
            ),
            "layers/secret.toml": layer(
                '[config.inputs.http.portal]\nurls = ["https://portal"]\n'
                'password = "secret://NOPE"\n'
            ),
        },
    )
    assert not cs.validated
    found = {d["path"]: d for d in diagnostics(cs, "SP-2010")}
    typo = found["layers/typo.toml"]
    assert typo["pointer"] == "config.inputs.cpuu.default"
    assert typo["message"].startswith("line 5: inputs.cpuu: unknown plugin")
    assert "fix: did you mean inputs.cpu?" in typo["message"]
    option = found["layers/option.toml"]
    assert option["pointer"] == "config.inputs.cpu.default.percpuu"
    assert "line 6" in option["message"]
    assert "fix: did you mean percpu?" in option["message"]
    assert "must be boolean" in found["layers/types.toml"]["message"]
    assert (
        "fix: write percpu as true or false, without quotes"
        in (found["layers/types.toml"]["message"])
    )
    removed = found["layers/removed.toml"]
    assert removed["pointer"] == "config.inputs.gnmi.default.dump_responses"
    assert "(Telegraf 1.39.3; Telegraf 1.37.3, 1.38.4 has it)" in removed["message"]
    for path, d in found.items():  # every one names its file, line and a fix
        assert d["message"].startswith("line "), (path, d["message"])
        assert "; fix: " in d["message"], (path, d["message"])
    [secret] = diagnostics(cs, "SP-4004")
    assert secret["path"] == "layers/secret.toml"
    assert secret["pointer"] == "config.inputs.http.portal.password"
    assert secret["message"] == ("line 6: Secret 'NOPE' does not exist; fix: add secrets/NOPE.toml")
    with pytest.raises(NotValidated):
        await reviews.submit_change_set(author, cs.id, seen=cs.digest)

    fixed = await validated(
        author,
        pool,
        {
            "routes/influx.toml": ROUTE,
            "layers/base.toml": layer(
                "[config.inputs.cpu.default]\npercpu = true\n\n"
                '[config.inputs.gnmi.default]\naddresses = ["r1:57400"]\ndump_responses = true\n',
                versions="<1.39",
            ),
        },
    )
    assert fixed.validated, fixed.validation


async def test_a_render_failing_a_versions_schema_stops_validation_and_delivery(
    sp_seed: Seed,
) -> None:
    admin, author = await tenant(sp_seed)
    pool, tid = sp_seed.services.pool, admin.tenant_id
    assert tid is not None
    good = {
        "routes/influx.toml": ROUTE,
        "layers/base.toml": layer("[config.inputs.cpu.default]\npercpu = true\n"),
    }
    await publish(pool, tid, good)
    old = await seed_fleet(pool, tid, 1, [{"env": "prod"}], version="1.37.3", prefix="old")
    new = await seed_fleet(pool, tid, 1, [{"env": "prod"}], version="1.39.1", prefix="new")
    ids = [old[0][0], new[0][0]]
    async with tenant_transaction(pool, SCOPE, tid) as conn:
        await refresh_agents(conn, tid, ids, "http://127.0.0.1:1")
        before = {i: await fleet_agents.get_agent(conn, tid, i) for i in ids}
    # a parameter hides the value's type from the file check; the render shows it to level
    # schema, for every agent version the render reaches
    bundle = (
        'agentKind = "telegraf"\nowner = "platform"\n\n[params.per]\ntype = "string"\n'
        'default = "yes"\n\n[config.inputs.cpu.default]\npercpu = "param://per"\n'
    )
    typed = {
        **good,
        "bundles/cpu.toml": bundle,
        "layers/base.toml": layer('[[bundles]]\nname = "cpu"\n'),
    }
    cs = await validated(author, pool, typed)
    assert not cs.validated
    assert not diagnostics(cs, "SP-2010")
    failed = diagnostics(cs, "SP-5004")
    assert {d["agent"] for d in failed} == {str(i) for i in ids}
    assert "telegraf 1.39.3 catalog schema" in " ".join(d["message"] for d in failed)
    assert all("percpu: must be boolean" in d["message"] for d in failed)

    # past review (published directly): an option 1.39 no longer has reaches the 1.37 agent
    # and never the 1.39 one
    bad = {
        **good,
        "layers/base.toml": layer(
            '[config.inputs.gnmi.default]\naddresses = ["r1:57400"]\ndump_responses = true\n'
        ),
    }
    await publish(pool, tid, bad)
    async with tenant_transaction(pool, SCOPE, tid) as conn:
        await refresh_agents(conn, tid, ids, "http://127.0.0.1:1")
        after = {i: await fleet_agents.get_agent(conn, tid, i) for i in ids}
        checks = await store.get_validations(
            conn,
            tid,
            [(after[ids[0]].desired_artifact, "1.37.3")],  # type: ignore[union-attr,list-item]
        )
    assert after[ids[0]].desired_artifact != before[ids[0]].desired_artifact  # type: ignore[union-attr]
    assert next(iter(checks.values())).ok
    assert after[ids[1]].sync == "render_error"  # type: ignore[union-attr]
    assert after[ids[1]].desired_artifact == before[ids[1]].desired_artifact  # type: ignore[union-attr]


async def test_what_the_loader_refuses_stops_validation_and_delivery_at_level_sandbox(
    sp_seed: Seed,
) -> None:
    admin, author = await tenant(sp_seed)
    pool, tid = sp_seed.services.pool, admin.tenant_id
    assert tid is not None
    good = {
        "routes/influx.toml": ROUTE,
        "layers/base.toml": layer("[config.inputs.cpu.default]\npercpu = true\n"),
    }
    await publish(pool, tid, good)
    agent = (await seed_fleet(pool, tid, 1, [{"env": "prod"}], version="1.39.1"))[0][0]
    async with tenant_transaction(pool, SCOPE, tid) as conn:
        await refresh_agents(conn, tid, [agent], "http://127.0.0.1:1")
        before = await fleet_agents.get_agent(conn, tid, agent)
    assert before is not None
    assert before.desired_artifact is not None
    # both options exist (the file check and level schema pass); inputs.http's Init refuses
    # the pair, so Telegraf exits on it
    both = {
        **good,
        "layers/base.toml": layer(
            '[config.inputs.http.portal]\nurls = ["https://portal"]\ntoken = "t"\n'
            'token_file = "/etc/telegraf/token"\n'
        ),
    }
    cs = await validated(author, pool, both)
    assert not cs.validated
    assert not diagnostics(cs, "SP-2010")
    assert not diagnostics(cs, "SP-5004")
    [refused] = diagnostics(cs, "SP-5005")
    assert refused["agent"] == str(agent)
    assert refused["message"].startswith("telegraf 1.39.1 loader stand-in (catalog 1.39.3): ")
    assert (
        "could not initialize input http: either use 'token_file' or 'token' not both"
        in (refused["message"])
    )
    assert "(line " in refused["message"]
    assert "fix: set token or token_file, not both" in refused["message"]
    async with tenant_transaction(pool, SCOPE, tid) as conn:
        digest = bytes.fromhex(refused["artifact"])
        schema = await store.get_validations(conn, tid, [(digest, "1.39.1")], "schema")
        sandbox = await store.get_validations(conn, tid, [(digest, "1.39.1")], "sandbox")
    assert [v.ok for v in schema.values()] == [True]
    [row] = sandbox.values()
    assert not row.ok
    assert row.validator == "telegraf 1.39.1 loader stand-in (catalog 1.39.3)"

    # published past review: the agent keeps what it runs, its sync says why
    await publish(pool, tid, both)
    async with tenant_transaction(pool, SCOPE, tid) as conn:
        await refresh_agents(conn, tid, [agent], "http://127.0.0.1:1")
        after = await fleet_agents.get_agent(conn, tid, agent)
    assert after is not None
    assert after.sync == "render_error"
    assert after.desired_artifact == before.desired_artifact
