"""The console's doors, over HTTP: signed out it sends to the sign-in page; its forms need
their token; a page of another tenant's object is 404 on every console route that names one;
and the sign-in page itself keeps an open redirect out."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any
from uuid import UUID

import httpx
import pytest
from fastapi import FastAPI
from platformkit.db.scope import tenant_transaction
from strataplane.actions import (
    bindings,
    change_sets,
    fleet_enrollment,
    invitations,
    pins,
    rollouts,
    teams,
    tokens,
    users,
)
from strataplane.db import SCOPE
from strataplane.simulate.seed import publish
from strataplane.store import members
from strataplane.testing import PASSWORD, Seed, client_for

pytestmark = pytest.mark.long_module  # minutes: run first (platformkit.testing.plugin)

TOKEN = re.compile(r'name="csrf_token" value="([^"]+)"')

# Every console page and form post; {agent}, {cs} and {ro} are ids of the tenant's objects.
PAGES = ["/fleet", "/fleet?label=env%3Dprod", "/fleet/agents/{agent}", "/change-sets",
         "/change-sets/{cs}", "/rollouts", "/rollouts/{ro}", "/audit", "/spec",
         "/spec?revision=1", "/spec/files/{file}", "/spec/diff?a=1&b=2", "/admin/people",
         "/admin/tokens", "/change-sets/{cs}/edit",
         "/change-sets/{cs}/edit?path=a.toml", "/admin/teams/{team}",
         "/platform/tenants", "/platform/users", "/platform/tokens"]  # fmt: skip
POSTS = ["/audit/verify", "/logout", "/login/choose", "/change-sets/{cs}/review",
         "/change-sets/{cs}/merge", "/rollouts/{ro}/pause", "/rollouts/{ro}/resume",
         "/rollouts/{ro}/advance", "/rollouts/{ro}/abort", "/admin/teams",
         "/admin/members/{member}/disable", "/admin/members/{member}/enable", "/admin/tokens",
         "/admin/tokens/{token}/revoke", "/admin/enrollment-tokens",
         "/admin/enrollment-tokens/{enrollment}/revoke", "/change-sets/new",
         "/change-sets/{cs}/check", "/change-sets/{cs}/files", "/change-sets/{cs}/validate",
         "/change-sets/{cs}/submit", "/fleet/agents/{agent}/pin", "/pins/{pin}/delete",
         "/admin/role-bindings", "/admin/role-bindings/{binding}/delete",
         "/change-sets/{cs}/rebase", "/change-sets/{cs}/close", "/change-sets/{cs}/files/delete",
         "/spec/revisions/2/revert", "/admin/members", "/admin/invitations",
         "/admin/invitations/{invitation}/revoke", "/admin/members/{member}/remove",
         "/admin/teams/{team}/members", "/admin/teams/{team}/members/{member}/remove",
         "/rollouts", "/pins", "/login/invitations/{invitation}/accept",
         "/platform/tenants", "/platform/users", "/platform/tenant-admins",
         "/platform/tokens"]  # fmt: skip
ID_PAGES = ["/fleet/agents/{agent}", "/change-sets/{cs}", "/rollouts/{ro}", "/spec/files/{file}",
            "/change-sets/{cs}/edit", "/admin/teams/{team}"]  # fmt: skip
ID_POSTS = [p for p in POSTS if "{" in p]
TREE = {"settings.toml": 'owner = "platform"\n', "layers/base.toml": 'agentKind = "telegraf"\n'
        'owner = "platform"\n\n[config.inputs.cpu.default]\npercpu = false\n'}  # fmt: skip


@dataclass
class Tenancy:
    a_user: str
    a_ids: dict[str, str]
    b_user: str
    b_ids: dict[str, str]

    @property
    def a_agent(self) -> str:
        return self.a_ids["agent"]

    @property
    def b_agent(self) -> str:
        return self.b_ids["agent"]


async def objects_of(seed: Seed, ctx: Any, tenant_id: UUID, name: str) -> dict[str, str]:
    """An agent, a change set and a rollout of the tenant, by id."""
    agent, enrollment = await enrolled_agent(seed, ctx, name)
    token = await tokens.create_token(ctx, f"{name}-ci")
    own = {**TREE, f"layers/{name}.toml": TREE["layers/base.toml"]}  # a file of its own
    first = await publish(seed.services.pool, tenant_id, own)
    newer = {**own, "layers/base.toml": TREE["layers/base.toml"].replace("false", "true")}
    await publish(seed.services.pool, tenant_id, newer)
    cs = await change_sets.create_change_set(ctx, f"{name} change")
    rollout = await rollouts.create_rollout(ctx, "telegraf", first)  # back to the first
    pin = await pins.create_pin(ctx, revision_id=first, reason="hold it", agent_id=agent)
    team = await teams.create_team(ctx, f"{name}-team", "A team")
    binding = await bindings.create_role_binding(ctx, role="viewer", team_id=team.id)
    invited = await invitations.invite_member(ctx, (await seed.user(f"{name}-guest")).id)
    return {"agent": str(agent), "cs": str(cs.id), "ro": str(rollout.rollout.id),
            "file": f"layers/{name}.toml", "token": str(token.token.id),
            "enrollment": str(enrollment), "member": str(ctx.user_id),
            "pin": str(pin.id), "binding": str(binding.id), "team": str(team.id),
            "invitation": str(invited.id), "tenant": str(tenant_id)}  # fmt: skip


async def enrolled_agent(seed: Seed, ctx: Any, name: str) -> tuple[UUID, UUID]:
    created = await fleet_enrollment.create_enrollment_token(ctx, name, labels={"env": "prod"})
    done = await fleet_enrollment.enroll_agent(
        seed.services, created.plaintext, instance_id=name, hostname=f"{name}.example.com",
        agent_url="http://127.0.0.1:9",
    )  # fmt: skip
    return done.agent_id, created.token.id


@pytest.fixture
async def tenancy(sp_app_seed: Seed) -> Tenancy:
    a, a_admin = await sp_app_seed.tenant("alpha")
    b, b_admin = await sp_app_seed.tenant("beta")
    a_ids = await objects_of(sp_app_seed, sp_app_seed.ctx(a_admin, a.id), a.id, "web-a")
    b_ids = await objects_of(sp_app_seed, sp_app_seed.ctx(b_admin, b.id), b.id, "web-b")
    return Tenancy(a_admin.subject, a_ids, b_admin.subject, b_ids)


async def sign_in(http: httpx.AsyncClient, username: str, next_path: str = "/fleet") -> str:
    page = await http.get("/login", params={"next": next_path})
    match = TOKEN.search(page.text)
    assert match is not None
    form = {"csrf_token": match.group(1), "username": username, "password": PASSWORD}
    done = await http.post("/login", data={**form, "next": next_path})
    assert done.status_code == 303, done.text
    return done.headers["location"]


async def session_token(http: httpx.AsyncClient) -> str:
    match = TOKEN.search((await http.get("/fleet")).text)
    assert match is not None
    return match.group(1)


async def test_signed_out_pages_send_to_sign_in(sp_app: FastAPI, tenancy: Tenancy) -> None:
    async with client_for(sp_app) as http:
        for path in PAGES:
            answer = await http.get(path.format(**tenancy.a_ids))
            assert answer.status_code == 303, path
            assert answer.headers["location"].startswith("/login?next=/")
        for path in POSTS:
            assert (await http.post(path.format(**tenancy.a_ids))).status_code == 303, path


async def test_sign_in_lands_where_asked_and_never_elsewhere(
    sp_app: FastAPI, tenancy: Tenancy
) -> None:
    async with client_for(sp_app) as http:
        assert await sign_in(http, tenancy.a_user, "/audit") == "/audit"
    for hostile in ("https://evil.example/", "//evil.example/x", "/\\evil.example"):
        async with client_for(sp_app) as http:
            assert await sign_in(http, tenancy.a_user, hostile) == "/fleet"


async def test_the_sign_in_form_needs_its_own_token(sp_app: FastAPI, tenancy: Tenancy) -> None:
    async with client_for(sp_app) as http:
        form = {"username": tenancy.a_user, "password": PASSWORD, "csrf_token": "x" * 32}
        refused = await http.post("/login", data=form)
        assert refused.status_code == 403
        assert "sp_session" not in http.cookies
        page = await http.get("/login")
        token = TOKEN.search(page.text).group(1)  # type: ignore[union-attr]
        wrong = await http.post("/login", data={**form, "csrf_token": token, "password": "no"})
        assert wrong.status_code == 401
        assert "Wrong username or password" in wrong.text


async def test_forms_need_the_sessions_token(sp_app: FastAPI, tenancy: Tenancy) -> None:
    async with client_for(sp_app) as http:
        await sign_in(http, tenancy.a_user)
        for path in POSTS:
            refused = await http.post(path.format(**tenancy.a_ids), data={"csrf_token": "forged"})
            assert refused.status_code == 403, path
            assert "auth.csrf" in refused.text
        token = await session_token(http)
        verified = await http.post("/audit/verify", data={"csrf_token": token})
        assert verified.status_code == 200
        assert 'data-verify="ok"' in verified.text
        out = await http.post("/logout", data={"csrf_token": token})
        assert out.status_code == 303
        assert (await http.get("/fleet")).status_code == 303  # the session is gone


async def test_another_tenants_objects_are_404_on_every_console_route(
    sp_app: FastAPI, tenancy: Tenancy
) -> None:
    async with client_for(sp_app) as http:
        await sign_in(http, tenancy.a_user)
        for route in ID_PAGES:
            own = await http.get(route.format(**tenancy.a_ids))
            assert own.status_code == 200, route
            other = await http.get(route.format(**tenancy.b_ids))
            assert other.status_code == 404, route
            assert "web-b" not in other.text
            junk = await http.get(route.format(agent="x", cs="x", ro="y", file="z", team="t"))
            assert junk.status_code == 404, route
        token = await session_token(http)
        for route in ID_POSTS:
            form = {"csrf_token": token, "digest": "00", "decision": "approve",
                    "path": "layers/x.toml", "content": 'owner = "platform"\n',
                    "revision": "1", "reason": "probe"}  # fmt: skip
            other = await http.post(route.format(**tenancy.b_ids), data=form)
            assert other.status_code == 404, route
        assert (await http.get(f"/rollouts/{tenancy.b_ids['ro']}")).status_code == 404
        missing = await http.post("/spec/revisions/99/revert", data={"csrf_token": token})
        assert missing.status_code == 404  # revisions are numbered per tenant
        async with client_for(sp_app) as other:
            await sign_in(other, tenancy.b_user)
            kept = await other.get(f"/change-sets/{tenancy.b_ids['cs']}")
            assert 'data-field="state">draft' in kept.text  # the probes closed nothing of B's
        for subject in (f"user:{tenancy.b_ids['member']}", f"team:{tenancy.b_ids['team']}"):
            form = {"csrf_token": token, "role": "admin", "subject": subject}
            bound = await http.post("/admin/role-bindings", data=form)
            assert bound.status_code == 404, subject  # another tenant's member or team
        scoped = {"csrf_token": token, "role": "viewer", "subject": f"team:{tenancy.a_ids['team']}",
                  "scope_kind": "owner", "scope_team": tenancy.b_ids["team"]}  # fmt: skip
        assert (await http.post("/admin/role-bindings", data=scoped)).status_code == 404
        added = {"csrf_token": token, "user_id": tenancy.b_ids["member"]}
        into = f"/admin/teams/{tenancy.a_ids['team']}/members"
        assert (await http.post(into, data=added)).status_code == 404  # B's member, A's team
        fleet = await http.get("/fleet")
        assert "web-a" in fleet.text
        assert "web-b" not in fleet.text  # pages without ids show the session's tenant only
        audit = await http.get("/audit")
        assert str(tenancy.b_agent) not in audit.text
        for path in ("/platform/tenants", "/platform/users", "/platform/tokens"):  # admins only
            assert (await http.get(path)).status_code == 403, path
            made = await http.post(path, data={"csrf_token": token, "slug": "x", "username": "x"})
            assert made.status_code == 403, path
        restore = {"csrf_token": token, "tenant": tenancy.b_ids["tenant"],
                   "user": tenancy.a_ids["member"]}  # fmt: skip
        assert (await http.post("/platform/tenant-admins", data=restore)).status_code == 403
        stop = f"/platform/tenants/{tenancy.b_ids['tenant']}/suspend"
        assert (await http.post(stop, data={"csrf_token": token})).status_code == 403


async def test_the_api_keeps_problem_json(sp_app: FastAPI, tenancy: Tenancy) -> None:
    async with client_for(sp_app) as http:
        answer = await http.get(f"/api/v1/agents/{tenancy.a_agent}")
    assert answer.status_code == 401
    assert answer.headers["content-type"].startswith("application/problem+json")


async def test_a_member_of_several_tenants_chooses_one(sp_app: FastAPI, sp_app_seed: Seed) -> None:
    a, a_admin = await sp_app_seed.tenant("gamma")
    b, _ = await sp_app_seed.tenant("delta")
    user = await sp_app_seed.member(sp_app_seed.ctx(a_admin, a.id), "viewer")
    # a second membership, as an accepted invitation leaves it
    async with tenant_transaction(sp_app_seed.services.pool, SCOPE, b.id) as conn:
        await members.insert_member(conn, b.id, user.id, "local")
    async with client_for(sp_app) as http:
        chooser = await sign_in(http, user.subject)
        assert chooser.startswith("/login/choose")
        page = await http.get(chooser)
        assert "gamma" in page.text
        assert "delta" in page.text
        token = TOKEN.search(page.text).group(1)  # type: ignore[union-attr]
        done = await http.post(
            "/login/choose", data={"csrf_token": token, "tenant": str(b.id), "next": "/audit"}
        )
        assert done.status_code == 303
        assert done.headers["location"] == "/audit"
        me = (await http.get("/api/v1/auth/me")).json()
        assert me["tenant_id"] == str(b.id)


async def test_hostile_form_input_is_refused_alone(sp_app: FastAPI, tenancy: Tenancy) -> None:
    async with client_for(sp_app) as http:
        page = await http.get("/login")
        token = TOKEN.search(page.text).group(1)  # type: ignore[union-attr]
        form = {"csrf_token": token, "username": "a\x00b", "password": "x"}
        assert (await http.post("/login", data=form)).status_code == 422
        await sign_in(http, tenancy.a_user)
        token = await session_token(http)
        for path, extra in (
            ("/admin/teams", {"slug": "ok", "display_name": "bad\x00name"}),
            ("/change-sets/new", {"title": "t\x00"}),
            ("/admin/tokens", {"name": "\x00"}),
            ("/admin/members", {"username": "u\x00", "password": PASSWORD}),
            ("/admin/members", {"username": "nobody", "password": PASSWORD, "role": "root"}),
            ("/admin/invitations", {"login": "lin\x00"}),
            ("/admin/invitations", {"login": "no-such-person"}),
            ("/rollouts", {"agent_kind": "telegraf", "revision": str(2**70)}),
            ("/rollouts", {"agent_kind": "telegraf", "revision": "99999"}),
            ("/rollouts", {"agent_kind": "toaster", "revision": "1"}),
            ("/pins", {"selector": "env=prod", "revision": str(2**70), "reason": "r"}),
            ("/pins", {"selector": "env", "revision": "1", "reason": "r"}),
            ("/fleet/agents/{agent}/pin", {"revision": str(2**70), "reason": "r"}),
            (
                "/admin/role-bindings",
                {
                    "role": "viewer",
                    "subject": "team:{team}",
                    "scope_kind": "selector",
                    "scope_selector": "x" * 5000,
                },
            ),
        ):
            form = {k: v.format(**tenancy.a_ids) for k, v in extra.items()}
            answer = await http.post(
                path.format(**tenancy.a_ids), data={"csrf_token": token, **form}
            )
            assert answer.status_code == 422, (path, extra)
            if not any("\x00" in v for v in extra.values()):  # refused before any page
                assert 'role="alert"' in answer.text, path  # a message on the page
        assert (await http.get("/fleet")).status_code == 200  # the session is unharmed
        assert 'data-member="nobody"' not in (await http.get("/admin/people")).text


async def test_an_invitation_names_a_person_by_username_or_email_never_by_id(
    sp_app: FastAPI, sp_app_seed: Seed
) -> None:
    _, admin = await sp_app_seed.tenant("epsilon")
    system = sp_app_seed.system()
    kim = await users.create_user(system, "kim", "Kim", PASSWORD, email="Kim@Example.com")
    for name in ("sam", "sasha"):
        await users.create_user(system, name, name.title(), PASSWORD, email="ops@example.com")
    async with client_for(sp_app) as http:
        await sign_in(http, admin.subject)
        token = await session_token(http)
        for login, words in (("ops@example.com", "several people share that email"),
                             (str(kim.id), "no person of this installation"),
                             ("", "no person of this installation")):  # fmt: skip
            refused = await http.post(
                "/admin/invitations", data={"csrf_token": token, "login": login}
            )
            assert refused.status_code == 422, login
            assert words in refused.text
        for login in ("kim@example.COM", "kim"):  # by email, any case; again: renewed
            form = {"csrf_token": token, "login": login}
            sent = await http.post("/admin/invitations", data=form)
            assert sent.status_code == 303, login
        people = (await http.get("/admin/people")).text
        assert people.count("data-invitation=") == 1
        assert "Kim@Example.com" not in people  # the tenant learns nothing of the person
