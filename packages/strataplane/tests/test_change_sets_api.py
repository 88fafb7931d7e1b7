"""The change set and spec API end to end over the real app (job runner included): ETags and
If-Match, Idempotency-Key, validation as a polled operation, merges racing over HTTP,
cross-tenant 404s, and the permission matrix of the new routes per role and scope."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

import httpx
import pytest
from fastapi import FastAPI
from strataplane.actions import teams, tokens
from strataplane.testing import Seed, client_for

PROBLEM = "application/problem+json"
CS = "/api/v1/change-sets"


def bundle(version: str, owner: str = "platform") -> str:
    return (
        f'owner = "{owner}"\nagentKind = "telegraf"\ndescription = "{version}"\n'
        "[config.inputs.cpu.default]\npercpu = true\n"
    )


def ok(response: httpx.Response, status: int = 200) -> Any:
    assert response.status_code == status, response.text
    return response.json() if response.content else None


def problem(response: httpx.Response, status: int, code: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == PROBLEM
    body: dict[str, Any] = response.json()
    assert body["code"] == code, body
    return body


@dataclass
class Api:
    app: FastAPI
    tenant: UUID
    tokens: dict[str, str] = field(default_factory=dict)

    def client(self, who: str) -> httpx.AsyncClient:
        return client_for(self.app, self.tokens[who])

    async def call(self, who: str, method: str, path: str, **kwargs: Any) -> httpx.Response:
        async with self.client(who) as http:
            return await http.request(method, path, **kwargs)

    async def edit(self, who: str, cs: dict[str, Any], path: str, content: str | None) -> Any:
        etag = {"If-Match": f'"{cs["digest"]}"'}
        if content is None:
            return await self.call(who, "DELETE", f"{CS}/{cs['id']}/files/{path}", headers=etag)
        body = {"content": content}
        return await self.call(who, "PUT", f"{CS}/{cs['id']}/files/{path}", json=body, headers=etag)

    async def validate(self, who: str, cs: dict[str, Any]) -> dict[str, Any]:
        op = ok(await self.call(who, "POST", f"{CS}/{cs['id']}/validate"), 202)
        for _ in range(200):
            op = ok(await self.call(who, "GET", f"/api/v1/operations/{op['id']}"))
            if op["state"] in ("succeeded", "failed"):
                break
            await asyncio.sleep(0.05)
        assert op["state"] == "succeeded", op
        return dict(ok(await self.call(who, "GET", f"{CS}/{cs['id']}")))

    async def ready(self, files: dict[str, str | None], who: str = "author") -> dict[str, Any]:
        """Created, edited, validated and submitted by ``who``."""
        cs = ok(await self.call(who, "POST", CS, json={"title": "change"}), 201)
        for path, content in files.items():
            cs = ok(await self.edit(who, cs, path, content))
            cs = cs.get("change_set", cs)
        cs = await self.validate(who, cs)
        assert cs["validated"], cs["validation"]
        submit = await self.call(
            who, "POST", f"{CS}/{cs['id']}/submit", headers={"If-Match": f'"{cs["digest"]}"'}
        )
        return dict(ok(submit))

    async def approve(self, cs: dict[str, Any], who: str = "approver") -> httpx.Response:
        return await self.call(
            who,
            "POST",
            f"{CS}/{cs['id']}/reviews",
            json={"decision": "approve"},
            headers={"If-Match": f'"{cs["digest"]}"'},
        )

    async def merge(self, cs: dict[str, Any], who: str = "author") -> httpx.Response:
        return await self.call(
            who, "POST", f"{CS}/{cs['id']}/merge", headers={"If-Match": f'"{cs["digest"]}"'}
        )


SUBJECTS: dict[str, tuple[str, dict[str, Any]]] = {
    "viewer": ("viewer", {}),
    "author": ("author", {}),
    "approver": ("approver", {}),
    "operator": ("operator", {}),
    "secret-admin": ("secret-admin", {}),
    "author@web": ("author", {"scope_kind": "owner", "team": "web"}),
    "author@sel": (
        "author",
        {"scope_kind": "selector", "scope_selector": {"matchLabels": {"env": "prod"}}},
    ),
    "approver@web": ("approver", {"scope_kind": "owner", "team": "web"}),
    "approver@platform": ("approver", {"scope_kind": "owner", "team": "platform"}),
}


async def _tenant(app: FastAPI, seed: Seed, slug: str) -> Api:
    tenant, admin = await seed.tenant(slug)
    admin_ctx = seed.ctx(admin, tenant.id)
    team_ids = {
        s: (await teams.create_team(admin_ctx, s, s.title())).id for s in ("platform", "web")
    }
    api = Api(app, tenant.id)
    api.tokens["admin"] = (await tokens.create_token(admin_ctx, "t")).plaintext
    for name, (role, scope) in SUBJECTS.items():
        scope = dict(scope)
        if "team" in scope:
            scope["scope_team_id"] = team_ids[scope.pop("team")]
        user = await seed.member(admin_ctx, role, **scope)
        api.tokens[name] = (await tokens.create_token(seed.ctx(user, tenant.id), "t")).plaintext
    return api


@pytest.fixture
async def api(sp_app: FastAPI, sp_app_seed: Seed) -> Api:
    return await _tenant(sp_app, sp_app_seed, "alpha")


async def test_http_round_trip_with_etags_keys_and_operations(api: Api) -> None:
    key = {"Idempotency-Key": "cs-1"}
    first = await api.call("author", "POST", CS, json={"title": "first"}, headers=key)
    again = await api.call("author", "POST", CS, json={"title": "first"}, headers=key)
    cs = ok(first, 201)
    assert ok(again, 201) == cs
    assert again.headers["Idempotent-Replayed"] == "true"
    assert first.headers["etag"] == f'"{cs["digest"]}"'
    assert cs["number"] == 1
    path = f"{CS}/CS-1/files/bundles/a.toml"
    problem(
        await api.call("author", "PUT", path, json={"content": bundle("v1")}),
        428,
        "change_set.digest_required",
    )
    stale = {"If-Match": '"' + "00" * 32 + '"'}
    body = problem(
        await api.call("author", "PUT", path, json={"content": bundle("v1")}, headers=stale),
        412,
        "change_set.digest_mismatch",
    )
    assert body["digest"] == cs["digest"]
    bad = problem(
        await api.edit("author", cs, "bundles/a.toml", "owner ="), 422, "change_set.invalid_file"
    )
    assert bad["diagnostics"][0]["code"] == "SP-1003"
    edited = await api.edit("author", cs, "bundles/a.toml", "# note\n" + bundle("v1"))
    out = ok(edited)
    assert [n["code"] for n in out["notices"]] == ["SP-1006"]
    assert edited.headers["etag"] == f'"{out["change_set"]["digest"]}"' != f'"{cs["digest"]}"'
    cs = await api.validate("author", out["change_set"])
    assert cs["validation_current"]
    assert cs["validation"]["ok"]
    toml = await api.call("viewer", "GET", path)
    assert toml.headers["content-type"] == "application/toml"
    assert b"#" not in toml.content
    diff = ok(await api.call("viewer", "GET", f"{CS}/1/diff"))
    assert diff[0]["path"] == "bundles/a.toml"
    assert diff[0]["old_hash"] is None
    cs = ok(
        await api.call(
            "author", "POST", f"{CS}/1/submit", headers={"If-Match": f'"{cs["digest"]}"'}
        )
    )
    problem(await api.merge(cs), 409, "change_set.not_approved")
    ok(await api.approve(cs), 201)
    merged = ok(await api.merge(cs))
    assert merged["revision"]["id"] == 2
    assert merged["change_set"]["state"] == "merged"
    tree = ok(await api.call("viewer", "GET", "/api/v1/spec/revisions/2/tree"))
    assert [f["path"] for f in tree["files"]] == ["bundles/a.toml"]
    log = ok(await api.call("viewer", "GET", "/api/v1/spec/log", params={"path": "bundles/a.toml"}))
    assert [(v["valid_from"], v["change_set"]) for v in log] == [(2, 1)]
    diffs = ok(await api.call("viewer", "GET", "/api/v1/spec/diff", params={"from": 2, "to": 1}))
    assert diffs[0]["new_hash"] is None
    latest = ok(await api.call("viewer", "GET", "/api/v1/spec/revisions/latest"))
    assert latest["message"] == "CS-1: first"
    schema = ok(await api.call("viewer", "GET", "/api/v1/openapi.json"))
    assert {"/api/v1/change-sets/{ref}/merge", "/api/v1/spec/diff"} <= set(schema["paths"])


async def test_racing_merges_over_http_one_must_rebase(api: Api) -> None:
    one = await api.ready({"bundles/a.toml": bundle("v1")})
    two = await api.ready({"bundles/b.toml": bundle("v1")})
    for cs in (one, two):
        ok(await api.approve(cs), 201)
    results = await asyncio.gather(api.merge(one), api.merge(two))
    assert sorted(r.status_code for r in results) == [200, 409]
    lost = next(r for r in results if r.status_code == 409)
    body = problem(lost, 409, "change_set.base_moved")
    assert body["base"] == 1
    loser = two if results[0].status_code == 200 else one
    rebased = ok(
        await api.call(
            "author",
            "POST",
            f"{CS}/{loser['id']}/rebase",
            json={},
            headers={"If-Match": f'"{loser["digest"]}"'},
        )
    )
    assert rebased["state"] == "draft"
    assert rebased["base_revision_id"] == 2


async def test_one_tenant_never_sees_anothers_spec(
    api: Api, sp_app: FastAPI, sp_app_seed: Seed
) -> None:
    beta = await _tenant(sp_app, sp_app_seed, "beta")
    theirs = await beta.ready({"bundles/secret.toml": bundle("v1")})
    ok(await beta.approve(theirs), 201)
    ok(await beta.merge(theirs))
    op = ok(await beta.call("author", "POST", CS, json={"title": "x"}), 201)
    op = ok(await beta.call("author", "POST", f"{CS}/{op['id']}/validate"), 202)
    for path in (f"{CS}/{theirs['id']}", f"{CS}/{theirs['id']}/files", f"{CS}/{theirs['id']}/diff"):
        problem(await api.call("admin", "GET", path), 404, "change_set.not_found")
    problem(await api.call("admin", "GET", "/api/v1/spec/revisions/2"), 404, "revision.not_found")
    problem(
        await api.call("admin", "GET", f"/api/v1/operations/{op['id']}"), 404, "operation.not_found"
    )
    problem(await api.merge(theirs, "admin"), 404, "change_set.not_found")
    assert ok(await api.call("admin", "GET", CS)) == []
    assert [r["id"] for r in ok(await api.call("admin", "GET", "/api/v1/spec/revisions"))] == [1]
    events = ok(await api.call("admin", "GET", "/api/v1/audit/events", params={"limit": 500}))
    assert all(e["object_id"] != theirs["id"] for e in events)
    theirs_events = ok(await beta.call("admin", "GET", "/api/v1/audit/events"))
    assert any(e["object_id"] == theirs["id"] for e in theirs_events)


EVERYONE = ["admin", *SUBJECTS]
AUTHORS = {"admin", "author", "author@web", "author@sel"}
APPROVE = {"admin", "approver", "approver@web"}  # approver@platform does not intersect web


async def test_permission_matrix_of_the_new_routes(api: Api) -> None:
    base = await api.ready(
        {"bundles/plat.toml": bundle("v1"), "bundles/web.toml": bundle("v1", owner="web")}
    )
    ok(await api.approve(base), 201)
    ok(await api.merge(base))
    web = await api.ready({"bundles/web.toml": bundle("v2", owner="web")})
    plat = await api.ready({"bundles/plat.toml": bundle("v2")})
    for who in EVERYONE:  # spec.read: any binding, whatever its scope
        for path in (
            "/api/v1/spec/revisions",
            "/api/v1/spec/revisions/2/tree",
            f"{CS}/{web['id']}",
            f"{CS}/{web['id']}/reviews",
            "/api/v1/spec/diff?from=1&to=2",
        ):
            ok(await api.call(who, "GET", path))
    created = {}
    for who in EVERYONE:  # change_set.author: any binding covers an empty overlay
        response = await api.call(who, "POST", CS, json={"title": who})
        if who in AUTHORS:
            created[who] = ok(response, 201)
        else:
            problem(response, 403, "permission.denied")
    scoped = [  # (who, path, content, status, code): coverage of owners before and after
        ("author@web", "bundles/web.toml", bundle("v3", owner="web"), 200, None),
        ("author@web", "bundles/plat.toml", bundle("v3"), 403, "change_set.scope"),
        ("author@web", "bundles/new.toml", bundle("v1", owner="platform"), 403, "change_set.scope"),
        ("author@sel", "bundles/plat.toml", bundle("v3"), 200, None),
        ("author@sel", "settings.toml", 'owner = "platform"\n', 403, "change_set.scope"),
        ("author", "settings.toml", 'owner = "platform"\n', 200, None),
        ("admin", "bundles/plat.toml", None, 200, None),
    ]
    for who, path, content, status, code in scoped:
        cs = ok(await api.call(who, "GET", f"{CS}/{created[who]['id']}"))
        response = await api.edit(who, cs, path, content)
        (problem(response, status, code) if code else ok(response, status))
    theirs = ok(await api.call("admin", "GET", f"{CS}/{created['author']['id']}"))
    problem(
        await api.edit("admin", theirs, "bundles/x.toml", bundle("v1")),
        403,
        "change_set.not_author",
    )
    for who in ("viewer", "approver", "operator"):
        problem(
            await api.call(who, "POST", f"{CS}/{created['author']['id']}/validate"),
            403,
            "permission.denied",
        )
    for who in EVERYONE:  # change_set.comment: any binding; a later approval replaces it
        comment = await api.call(
            who,
            "POST",
            f"{CS}/{web['id']}/reviews",
            json={"decision": "comment", "comment": "seen"},
            headers={"If-Match": f'"{web["digest"]}"'},
        )
        ok(comment, 201)
        response = await api.approve(web, who)  # change_set.review: must intersect (web)
        if who in APPROVE:
            ok(response, 201)
        else:
            problem(response, 403, "permission.denied")
    ok(await api.approve(plat), 201)
    for who in ("viewer", "approver", "operator", "secret-admin", "approver@web"):
        problem(await api.merge(plat, who), 403, "permission.denied")
    problem(await api.merge(plat, "author@web"), 403, "change_set.scope")
    ok(await api.merge(web, "author@web"))  # change_set.merge: covers web
    problem(
        await api.call("author@web", "POST", f"{CS}/{plat['id']}/close"), 403, "permission.denied"
    )
    closed = ok(await api.call("admin", "POST", f"{CS}/{plat['id']}/close"))  # close_any
    assert closed["state"] == "closed"
    ok(await api.call("author@sel", "POST", f"{CS}/{created['author@sel']['id']}/close"))
