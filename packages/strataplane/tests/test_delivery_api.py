"""Rollouts, pins and the catalog through the HTTP API of the app with its controllers running:
per-stage progress, pause / resume / advance / abort with their state rules and audit, pins
created and deleted, the catalog read; approvals that hold (selector rules over the impact,
self-approval refused)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from fastapi import FastAPI
from strataplane.actions import (
    approval_status,
    audit,
    change_sets,
    reviews,
    spec,
    teams,
    tokens,
    validation,
)
from strataplane.actions.reviews import SelfApproval
from strataplane.simulate.seed import publish, seed_fleet
from strataplane.testing import Seed, client_for

LAYER = (
    'agentKind = "telegraf"\nowner = "platform"\nroutes = ["influx"]\n\n'
    "[config.inputs.cpu.default]\npercpu = {percpu}\n"
)
ROUTE = (
    'agentKind = "telegraf"\nowner = "platform"\n\n'
    '[config.outputs.influxdb_v2.main]\nurls = ["https://influx.example.com"]\n'
)
POLICY = """owner = "platform"

[[stages]]
name = "canary"
bakeTime = "1h"
selector = { matchLabels = { canary = "true" } }

[[stages]]
name = "everything"
"""


def tree(percpu: str) -> dict[str, str]:
    return {
        "layers/base.toml": LAYER.format(percpu=percpu),
        "routes/influx.toml": ROUTE,
        "policies/rollout/staged.toml": POLICY,
        "settings.toml": 'owner = "platform"\n\n[rollout]\ndefaultPolicy = "staged"\n',
    }


async def until(check: Callable[[], Awaitable[bool]], what: str, within: float = 45) -> None:
    deadline = asyncio.get_running_loop().time() + within
    while not await check():
        assert asyncio.get_running_loop().time() < deadline, what
        await asyncio.sleep(0.2)


async def test_rollouts_and_pins_over_http(sp_app: FastAPI) -> None:
    seed = Seed(sp_app.state.services)
    pool = sp_app.state.services.pool
    tenant, admin = await seed.tenant()
    ctx = seed.ctx(admin, tenant.id)
    await teams.create_team(ctx, "platform", "Platform")
    token = (await tokens.create_token(ctx, "ops")).plaintext
    viewer = seed.ctx(await seed.member(ctx, "viewer"), tenant.id)
    viewer_token = (await tokens.create_token(viewer, "v")).plaintext
    first = await publish(pool, tenant.id, tree("false"))
    await seed_fleet(pool, tenant.id, 1, [{"canary": "true"}], prefix="can")
    await seed_fleet(pool, tenant.id, 2, [{"env": "prod"}], prefix="web")
    second = await publish(pool, tenant.id, tree("true"))

    async with client_for(sp_app, token) as http:

        async def show(ref: str) -> dict[str, Any]:
            reply = await http.get(f"/api/v1/rollouts/{ref}")
            assert reply.status_code == 200, reply.text
            body: dict[str, Any] = reply.json()
            return body

        async def agents_rendered() -> bool:
            reply = await http.get("/api/v1/hosts")
            return reply.status_code == 200 and len(reply.json()["items"]) == 3

        await until(agents_rendered, "three hosts")
        # roll back to r1, staged: the canary first, baking an hour
        created = await http.post(
            "/api/v1/rollouts", json={"agent_kind": "telegraf", "to_revision": first}
        )
        assert created.status_code == 201, created.text
        ro = created.json()
        assert (ro["name"], ro["from_revision_id"], ro["policy_name"]) == (
            "RO-1",
            second,
            "staged",
        )

        async def canary_running() -> bool:
            return (await show("RO-1"))["stages"][0]["state"] == "running"

        await until(canary_running, "the canary stage starts")
        view = await show("1")
        assert [(s["name"], s["agents_total"], s["bake_seconds"]) for s in view["stages"]] == [
            ("canary", 1, 3600.0),
            ("everything", None, 0.0),
        ]
        assert view["stages"][0]["assigned"] == 1
        again = await http.post("/api/v1/rollouts", json={"to_revision": first})
        assert again.json()["code"] == "rollout.active"

        async with client_for(sp_app, viewer_token) as v:
            denied = await v.post("/api/v1/rollouts/RO-1/pause")
            assert denied.status_code == 403
            assert (await v.get("/api/v1/rollouts/RO-1")).status_code == 200

        assert (await http.post("/api/v1/rollouts/RO-1/pause")).json()["state"] == "paused"
        refused = await http.post("/api/v1/rollouts/RO-1/advance")
        assert refused.status_code == 409
        assert refused.json()["code"] == "rollout.invalid_state"
        assert (await http.post("/api/v1/rollouts/RO-1/resume")).json()["state"] == "running"
        assert (await http.post("/api/v1/rollouts/RO-1/advance")).status_code == 200

        async def halted() -> bool:
            return (await show("RO-1"))["state"] == "halted"

        # the seeded canary never sends a heartbeat: it has not proven the artifact
        await until(halted, "advance ends the bake; the guardrail breaches")
        view = await show("RO-1")
        assert "maxApplyFailurePercent" in view["halt_reason"]
        assert view["stages"][0]["guardrails"]["applyFailures"] == 1
        assert view["stages"][1]["state"] == "pending"
        aborted = await http.post("/api/v1/rollouts/RO-1/abort")
        assert aborted.json()["state"] == "aborted"
        assert aborted.json()["halt_reason"] == view["halt_reason"]
        assert (await http.get("/api/v1/rollouts", params={"state": "aborted"})).json()[0][
            "number"
        ] == 1

        pin = await http.post(
            "/api/v1/pins",
            json={
                "revision": first,
                "reason": "freeze",
                "selector": {"matchLabels": {"env": "prod"}},
                "agent_kinds": ["telegraf"],
                "expires_in_seconds": 3600,
            },
        )
        assert pin.status_code == 201, pin.text
        assert [p["id"] for p in (await http.get("/api/v1/pins")).json()] == [pin.json()["id"]]
        bad = await http.post(
            "/api/v1/pins", json={"revision": 99, "reason": "x", "agent_id": ro["id"]}
        )
        assert bad.status_code in (404, 422)
        assert (await http.delete(f"/api/v1/pins/{pin.json()['id']}")).status_code == 204

        catalog = (await http.get("/api/v1/catalog")).json()
        assert [b["version"] for b in catalog] == ["1.37.3", "1.38.4", "1.39.3"]
        cpu = await http.get("/api/v1/catalog/telegraf/1.39.3/inputs/cpu")
        assert cpu.json()["properties"]["percpu"]["type"] == "boolean"
        missing = await http.get("/api/v1/catalog/telegraf/1.39.3/inputs/cpuu")
        assert missing.json()["code"] == "catalog.not_found"

    actions = [e["action"] for e in await audit.list_audit_events(ctx, limit=200)]
    for action in (
        "rollout.create",
        "rollout.pause",
        "rollout.resume",
        "rollout.advance",
        "rollout.stage_start",
        "rollout.halt",
        "rollout.abort",
        "pin.create",
        "pin.delete",
    ):
        assert action in actions, action


async def test_approvals_hold_selector_rules_and_no_self_approval(sp_seed: Seed) -> None:
    pool = sp_seed.services.pool
    tenant, admin = await sp_seed.tenant()
    ctx = sp_seed.ctx(admin, tenant.id)
    made = {slug: await teams.create_team(ctx, slug, slug) for slug in ("platform", "sre")}
    policy = (
        'owner = "platform"\n[[rules]]\nname = "production"\nteams = ["sre"]\n'
        'when = { selector = { matchLabels = { env = "prod" } } }\n'
    )
    await publish(pool, tenant.id, {**tree("false"), "policies/approval/default.toml": policy})
    await seed_fleet(pool, tenant.id, 2, [{"env": "prod"}], prefix="prod")
    from platformkit.db.scope import tenant_transaction
    from strataplane.actions.fleet_desired import refresh_agents
    from strataplane.db import SCOPE
    from strataplane.store import fleet_agents

    async with tenant_transaction(pool, SCOPE, tenant.id) as conn:
        ids = [a.id for a in await fleet_agents.list_agents(conn, tenant.id)]
        await refresh_agents(conn, tenant.id, ids, "http://127.0.0.1:1")
    author_user = await sp_seed.member(ctx, "author")
    await sp_seed.member(ctx, "approver")
    author = sp_seed.ctx(author_user, tenant.id)
    # the author may also approve elsewhere: give them the approver role too
    from strataplane.actions import bindings

    await bindings.create_role_binding(ctx, role="approver", user_id=author_user.id)
    cs = await change_sets.create_change_set(author, "prod change")
    content = LAYER.format(percpu="true").encode()
    cs = (
        await spec.write_file(author, cs.id, "layers/base.toml", content, seen=cs.digest)
    ).change_set
    op, _ = await validation.request_validation(author, cs.id)
    await validation.run_validation(pool, validation.params_for(op, author.principal))
    cs = await change_sets.access_change_set(author, cs.id)
    assert cs.validated, cs.validation
    cs = await reviews.submit_change_set(author, cs.id, seen=cs.digest)
    assert cs.requirements is not None
    required = [t.get("team") for t in cs.requirements["teams"]]
    assert "sre" in required  # two prod agents impacted: the selector rule applies
    with pytest.raises(SelfApproval):
        await reviews.review_change_set(author, cs.id, "approve", seen=cs.digest)

    # what is missing and who can give it: the sre member, never the author
    on_call = await sp_seed.member(ctx, "approver")
    await teams.add_team_member(ctx, made["sre"].id, on_call.id)
    status = await approval_status.approval_status(ctx, cs.id)
    minimum, team = status.requirements
    assert (team.teams, team.rules, team.count, team.missing) == (
        ["sre"],
        ["default/production"],
        1,
        1,
    )
    assert team.can_satisfy == [on_call.display_name]
    assert not team.met
    assert minimum.teams == []
    assert minimum.missing == 1
    assert on_call.display_name in minimum.can_satisfy
    assert author_user.display_name not in minimum.can_satisfy
    assert not status.approved
    cs, _ = await reviews.review_change_set(
        sp_seed.ctx(on_call, tenant.id), cs.id, "approve", seen=cs.digest
    )
    status = await approval_status.approval_status(ctx, cs.id)
    assert status.approved
    assert [(r.met, r.missing, r.approved_by) for r in status.requirements] == [
        (True, 0, [on_call.display_name]),
        (True, 0, [on_call.display_name]),
    ]


async def test_the_agent_list_filters_pages_and_shows_only_what_the_caller_may_read(
    sp_app: FastAPI,
) -> None:
    seed = Seed(sp_app.state.services)
    pool = seed.services.pool
    tenant, admin = await seed.tenant()
    other, _ = await seed.tenant()
    ctx = seed.ctx(admin, tenant.id)
    canary = await seed_fleet(pool, tenant.id, 2, [{"canary": "true"}], prefix="canary")
    await seed_fleet(pool, tenant.id, 3, [{"env": "prod"}], version="1.38.4", prefix="web")
    await seed_fleet(pool, other.id, 2, [{"canary": "true"}], prefix="elsewhere")
    scoped = await seed.member(
        ctx, "viewer", scope_kind="selector", scope_selector={"matchLabels": {"canary": "true"}}
    )
    admin_token = (await tokens.create_token(ctx, "t")).plaintext
    scoped_token = (await tokens.create_token(seed.ctx(scoped, tenant.id), "t")).plaintext

    async def ids(token: str, query: str) -> list[str]:
        async with client_for(sp_app, token) as http:
            answer = await http.get(f"/api/v1/agents{query}")
        assert answer.status_code == 200, answer.text
        return [a["id"] for a in answer.json()["items"]]

    assert len(await ids(admin_token, "")) == 5  # never another tenant's
    assert set(await ids(admin_token, "?label=canary%3Dtrue")) == {str(a[0]) for a in canary}
    assert len(await ids(admin_token, "?version=1.38.4&kind=telegraf&sync=updating")) == 3
    assert await ids(admin_token, "?label=env%3Dprod&label=canary%3Dtrue") == []
    assert await ids(admin_token, "?health=healthy") == []
    # a selector-scoped viewer sees the agents of the hosts its scope covers, and no others
    assert set(await ids(scoped_token, "")) == {str(a[0]) for a in canary}
    async with client_for(sp_app, admin_token) as http:
        first = (await http.get("/api/v1/agents?limit=3")).json()
        assert len(first["items"]) == 3
        second = (await http.get(f"/api/v1/agents?limit=3&after={first['next']}")).json()
    assert len(second["items"]) == 2
    assert second["next"] is None
