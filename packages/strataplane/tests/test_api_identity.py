"""The identity API end to end over the real app: login and CSRF, platform tenants and
tokens, members, teams, service accounts, role bindings, Idempotency-Key, problem+json,
cross-tenant 404s, and tenant deletion run by the job runner."""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from strataplane.testing import PASSWORD, Seed, client_for

PROBLEM = "application/problem+json"


@dataclass
class World:
    app: FastAPI
    platform_token: str
    tokens: dict[str, str]  # tenant slug -> its admin's token
    tenants: dict[str, str]  # tenant slug -> id

    def client(self, token: str | None = None) -> httpx.AsyncClient:
        return client_for(self.app, token)


def ok(response: httpx.Response, status: int = 200) -> Any:
    assert response.status_code == status, response.text
    return response.json() if response.content else None


def problem(response: httpx.Response, status: int, code: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == PROBLEM
    body: dict[str, Any] = response.json()
    assert body["code"] == code
    return body


@pytest.fixture
async def world(sp_app: FastAPI, sp_app_seed: Seed) -> World:
    await sp_app_seed.user("root", platform_admin=True)
    async with client_for(sp_app) as http:
        login = await http.post(
            "/api/v1/auth/login", json={"username": "root", "password": PASSWORD, "platform": True}
        )
        session = ok(login)
        assert "sp_session" in login.cookies
        refused = await http.post("/api/v1/platform/tokens", json={"name": "ops"})
        problem(refused, 403, "auth.csrf")
        created = await http.post(
            "/api/v1/platform/tokens",
            json={"name": "ops"},
            headers={"X-CSRF-Token": session["csrf_token"]},
        )
        platform_token = ok(created, 201)["token"]
    world = World(sp_app, platform_token, {}, {})
    async with world.client(platform_token) as http:
        for slug in ("alpha", "beta"):
            admin = ok(await http.post("/api/v1/platform/users", json={
                "username": f"{slug}-admin", "display_name": slug, "password": PASSWORD,
            }), 201)  # fmt: skip
            tenant = ok(await http.post("/api/v1/platform/tenants", json={
                "slug": slug, "display_name": slug.title(), "admin_user_id": admin["id"],
            }), 201)  # fmt: skip
            world.tenants[slug] = tenant["id"]
    for slug in world.tenants:
        async with world.client() as http:
            body = {"username": f"{slug}-admin", "password": PASSWORD, "tenant": slug}
            session = ok(await http.post("/api/v1/auth/login", json=body))
            assert session["tenant_id"] == world.tenants[slug]
            token = await http.post(
                "/api/v1/tokens",
                json={"name": "admin"},
                headers={"X-CSRF-Token": session["csrf_token"]},
            )
            world.tokens[slug] = ok(token, 201)["token"]
    return world


async def test_token_is_returned_once_and_takes_no_key(world: World) -> None:
    async with world.client(world.tokens["alpha"]) as http:
        refused = await http.post("/api/v1/tokens", json={"name": "ci", "roles": ["author"]})
        assert problem(refused, 422, "token.roles_not_held")["not_held"] == ["author"]
        created = ok(await http.post("/api/v1/tokens", json={"name": "ci", "roles": ["admin"]}),
                     201)  # fmt: skip
        assert created["token"].startswith("spk_")
        assert created["token_prefix"] == created["token"][:8]
        listed = ok(await http.get("/api/v1/tokens"))
        assert {t["name"] for t in listed} == {"admin", "ci"}
        assert all("token" not in t for t in listed)
        keyed = await http.post(
            "/api/v1/tokens", json={"name": "x"}, headers={"Idempotency-Key": "k1"}
        )
        problem(keyed, 400, "idempotency_key.not_accepted")
        me = ok(await http.get("/api/v1/auth/me"))
        assert me["tenant_id"] == world.tenants["alpha"]
    async with world.client(created["token"]) as http:
        assert ok(await http.get("/api/v1/auth/me"))["token_roles"] == ["admin"]


async def test_creating_posts_honour_idempotency_keys(world: World) -> None:
    async with world.client(world.tokens["alpha"]) as http:
        headers = {"Idempotency-Key": "team-sre"}
        first = await http.post("/api/v1/teams", json={"slug": "sre", "display_name": "SRE"},
                                headers=headers)  # fmt: skip
        again = await http.post("/api/v1/teams", json={"slug": "sre", "display_name": "SRE"},
                                headers=headers)  # fmt: skip
        assert ok(first, 201) == ok(again, 201)
        assert again.headers["Idempotent-Replayed"] == "true"
        assert again.headers["location"] == first.headers["location"]
        other = await http.post("/api/v1/teams", json={"slug": "ops", "display_name": "Ops"},
                                headers=headers)  # fmt: skip
        problem(other, 422, "idempotency_key.mismatch")
        problem(await http.post("/api/v1/teams", json={"slug": "sre", "display_name": "x"}),
                409, "team.slug_taken")  # fmt: skip
        page = ok(await http.get("/api/v1/teams"))
        assert [t["slug"] for t in page["items"]] == ["sre"]


async def _resources(http: httpx.AsyncClient) -> dict[str, str]:
    """One of each resource in the caller's tenant; returns paths to them."""
    team = ok(await http.post("/api/v1/teams", json={"slug": "web", "display_name": "Web"}), 201)
    member = ok(await http.post("/api/v1/members", json={
        "username": f"m-{uuid.uuid4().hex[:6]}", "password": PASSWORD}), 201)  # fmt: skip
    account = ok(await http.post("/api/v1/service-accounts", json={"name": "ci"}), 201)
    binding = ok(await http.post("/api/v1/role-bindings", json={
        "role": "viewer", "user_id": member["user_id"]}), 201)  # fmt: skip
    token = ok(await http.post("/api/v1/tokens", json={"name": "spare"}), 201)
    return {
        "team": f"/api/v1/teams/{team['id']}",
        "member": f"/api/v1/members/{member['user_id']}",
        "service_account": f"/api/v1/service-accounts/{account['id']}",
        "role_binding": f"/api/v1/role-bindings/{binding['id']}",
        "token": f"/api/v1/tokens/{token['id']}",
    }


async def test_other_tenants_rows_answer_404(world: World) -> None:
    async with world.client(world.tokens["beta"]) as http:
        theirs = await _resources(http)
    async with world.client(world.tokens["alpha"]) as http:
        for kind, path in theirs.items():
            if kind != "token":
                problem(await http.get(path), 404, f"{kind}.not_found")
            problem(await http.delete(path), 404, f"{kind}.not_found")
        problem(await http.patch(theirs["team"], json={"display_name": "x"}), 404,
                "team.not_found")  # fmt: skip
        problem(await http.patch(theirs["member"], json={"disabled": True}), 404,
                "member.not_found")  # fmt: skip
        assert ok(await http.get("/api/v1/teams"))["items"] == []
        assert len(ok(await http.get("/api/v1/members"))["items"]) == 1
    async with world.client(world.tokens["beta"]) as http:  # still all there
        for path in theirs.values():
            if "/tokens/" not in path:
                ok(await http.get(path))


async def test_credentials_stay_in_their_lane(world: World) -> None:
    async with world.client(world.tokens["alpha"]) as http:
        problem(await http.get("/api/v1/platform/tenants"), 403, "platform.admin_required")
    async with world.client(world.platform_token) as http:
        problem(await http.get("/api/v1/teams"), 401, "auth.required")
        page = ok(await http.get("/api/v1/platform/tenants"))
        assert [t["slug"] for t in page["items"]] == ["alpha", "beta"]
    async with world.client("spk_" + "a" * 52) as http:
        problem(await http.get("/api/v1/teams"), 401, "auth.required")
    async with world.client() as http:
        problem(await http.get("/api/v1/teams"), 401, "auth.required")
        bad = {"username": "alpha-admin", "password": "nope", "tenant": "alpha"}
        problem(await http.post("/api/v1/auth/login", json=bad), 401, "auth.invalid_credentials")


async def test_service_account_in_use_is_409(world: World, sp_app_seed: Seed) -> None:
    import psycopg

    async with world.client(world.tokens["alpha"]) as http:
        account = ok(await http.post("/api/v1/service-accounts", json={"name": "ci"}), 201)
        url = sp_app_seed.services.settings.database_url.get_secret_value()  # type: ignore[union-attr]
        with psycopg.connect(url) as conn:  # it started an operation
            conn.execute(
                "INSERT INTO strataplane.operation (id, tenant_id, kind, object_id, created_by) "
                "VALUES (%s, %s, 'change_set.validate', 'x', %s)",
                (uuid.uuid4(), world.tenants["alpha"], account["id"]),
            )
        body = problem(await http.delete(f"/api/v1/service-accounts/{account['id']}"), 409,
                       "service_account.in_use")  # fmt: skip
        assert body["references"] == ["operation.created_by"]


async def test_suspend_then_delete_a_tenant(world: World) -> None:
    alpha = world.tenants["alpha"]
    async with world.client(world.platform_token) as http:
        assert ok(await http.post(f"/api/v1/platform/tenants/{alpha}/suspend"))["state"] == (
            "suspended"
        )
        async with world.client(world.tokens["alpha"]) as tenant_http:
            problem(await tenant_http.get("/api/v1/teams"), 403, "tenant.suspended")
        op = ok(await http.delete(f"/api/v1/platform/tenants/{alpha}"), 202)
        for _ in range(100):
            op = ok(await http.get(f"/api/v1/platform/operations/{op['id']}"))
            if op["state"] in ("succeeded", "failed"):
                break
            await asyncio.sleep(0.1)
        assert op["state"] == "succeeded", op
        problem(await http.get(f"/api/v1/platform/tenants/{alpha}"), 404, "tenant.not_found")
    async with world.client(world.tokens["alpha"]) as http:
        problem(await http.get("/api/v1/teams"), 401, "auth.required")
    async with world.client(world.tokens["beta"]) as http:
        ok(await http.get("/api/v1/teams"))


async def test_openapi_documents_the_surface(world: World) -> None:
    async with world.client() as http:
        spec = ok(await http.get("/api/v1/openapi.json"))
    paths = spec["paths"]
    for path in ("/api/v1/platform/tenants", "/api/v1/members", "/api/v1/teams",
                 "/api/v1/service-accounts", "/api/v1/role-bindings", "/api/v1/tokens",
                 "/api/v1/auth/login", "/api/v1/audit/events"):  # fmt: skip
        assert path in paths, path
    params = {p["name"] for p in paths["/api/v1/teams"]["post"]["parameters"]}
    assert "Idempotency-Key" in params
