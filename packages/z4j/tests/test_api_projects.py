"""Projects, members and users through the API, and the role matrix at the HTTP boundary."""

from __future__ import annotations

import uuid

import httpx
import pytest

from .conftest import Seed


async def test_admin_creates_a_project_and_owns_it(seed: Seed) -> None:
    await seed.user("root@example.com", is_admin=True)
    async with seed.signed_in("root@example.com") as http:
        made = await http.post("/api/v1/projects", json={"name": "  billing  "})
        assert made.status_code == 201
        body = made.json()
        assert body["name"] == "billing"
        assert body["role"] == "owner"
        taken = await http.post("/api/v1/projects", json={"name": "billing"})
        assert taken.status_code == 409
        assert taken.json()["code"] == "project.name_taken"
        detail = await http.get(f"/api/v1/projects/{body['id']}")
        assert detail.status_code == 200
        assert detail.json()["task_counts_24h"]["failed"] == 0
        assert detail.json()["agents_total"] == 0


async def test_non_admins_cannot_create_projects(seed: Seed) -> None:
    owner = await seed.user("own@example.com")
    await seed.project(owner)
    async with seed.signed_in("own@example.com") as http:
        response = await http.post("/api/v1/projects", json={"name": "mine"})
        assert response.status_code == 403
        assert response.json()["code"] == "permission.denied"


async def test_users_see_only_their_projects_and_admins_see_all(seed: Seed) -> None:
    admin = await seed.user("root@example.com", is_admin=True)
    ada = await seed.user("ada@example.com")
    mine = await seed.project(ada, "ada-project")
    await seed.project(admin, "admin-project")
    async with seed.signed_in("ada@example.com") as http:
        names = [p["name"] for p in (await http.get("/api/v1/projects")).json()]
        assert names == ["ada-project"]
    async with seed.signed_in("root@example.com") as http:
        listed = {p["name"]: p["role"] for p in (await http.get("/api/v1/projects")).json()}
        assert listed == {"ada-project": "admin", "admin-project": "owner"}
        assert (await http.get(f"/api/v1/projects/{mine}")).status_code == 200


async def test_brain_admins_add_existing_accounts_and_managers_invite(seed: Seed) -> None:
    owner = await seed.user("own@example.com")
    project = await seed.project(owner)
    await seed.member(project, await seed.user("adm@example.com"), "admin")
    await seed.user("root@example.com", is_admin=True)
    await seed.user("new@example.com")
    await seed.user("other@example.com")
    url = f"/api/v1/projects/{project}/members"
    async with seed.signed_in("adm@example.com") as http:
        direct = await http.post(url, json={"email": "new@example.com", "role": "viewer"})
        assert direct.status_code == 403
        assert "invite" in direct.json()["detail"]
    async with seed.signed_in("root@example.com") as http:
        owner_grant = await http.post(url, json={"email": "new@example.com", "role": "owner"})
        assert owner_grant.status_code == 403
        added = await http.post(url, json={"email": "NEW@example.com", "role": "operator"})
        assert added.status_code == 201
        assert added.json()["role"] == "operator"
        again = await http.post(url, json={"email": "new@example.com", "role": "viewer"})
        assert again.status_code == 409
        assert again.json()["code"] == "member.exists"
        nobody = await http.post(url, json={"email": "none@example.com", "role": "viewer"})
        assert nobody.status_code == 404
        assert nobody.json()["code"] == "user.not_found"
        bad_role = await http.post(url, json={"email": "other@example.com", "role": "god"})
        assert bad_role.status_code == 422
        members = {m["email"]: m["role"] for m in (await http.get(url)).json()}
    assert members == {
        "own@example.com": "owner",
        "adm@example.com": "admin",
        "new@example.com": "operator",
    }


async def test_admins_create_users(seed: Seed, client: httpx.AsyncClient) -> None:
    await seed.user("root@example.com", is_admin=True)
    await seed.user("ada@example.com")
    body = {"email": "bob@example.com", "password": "a long password"}
    async with seed.signed_in("ada@example.com") as http:
        assert (await http.post("/api/v1/users", json=body)).status_code == 403
    async with seed.signed_in("root@example.com") as http:
        made = await http.post("/api/v1/users", json=body)
        assert made.status_code == 201
        assert made.json()["is_admin"] is False
        assert (await http.post("/api/v1/users", json=body)).status_code == 409
        short = await http.post(
            "/api/v1/users", json={**body, "email": "c@example.com", "password": "short"}
        )
        assert short.status_code == 422
        assert short.json()["field"] == "password"
    signed = await client.post(
        "/api/v1/auth/login", json={"email": "bob@example.com", "password": "a long password"}
    )
    assert signed.status_code == 200


# (method, path template, body, least role that may do it)
ROUTES = [
    ("GET", "/api/v1/projects/{p}", None, "viewer"),
    ("GET", "/api/v1/projects/{p}/members", None, "viewer"),
    ("GET", "/api/v1/projects/{p}/agents", None, "viewer"),
    ("GET", "/api/v1/projects/{p}/tasks", None, "viewer"),
    ("POST", "/api/v1/projects/{p}/agents", {"name": "n-{role}"}, "admin"),
    ("GET", "/api/v1/projects/{p}/invitations", None, "admin"),
    (
        "POST",
        "/api/v1/projects/{p}/invitations",
        {"email": "x-{role}@example.com", "role": "viewer"},
        "admin",
    ),
]
ORDER = ["viewer", "operator", "admin", "owner"]


@pytest.mark.parametrize("role", ORDER)
async def test_role_matrix_over_http(seed: Seed, role: str) -> None:
    owner = await seed.user("own@example.com")
    project = await seed.project(owner)
    if role == "owner":
        email = "own@example.com"
    else:
        email = f"{role}@example.com"
        await seed.member(project, await seed.user(email), role)
    await seed.user(f"x-{role}@example.com")
    async with seed.signed_in(email) as http:
        for method, template, body, least in ROUTES:
            url = template.format(p=project)
            payload = {k: v.format(role=role) for k, v in body.items()} if body else None
            response = await http.request(method, url, json=payload)
            allowed = ORDER.index(role) >= ORDER.index(least)
            if allowed:
                assert response.status_code in (200, 201), (role, url, response.text)
            else:
                assert response.status_code == 403, (role, url, response.text)
                assert response.json()["code"] == "permission.denied"


async def test_unknown_project_is_404(seed: Seed) -> None:
    await seed.user("root@example.com", is_admin=True)
    async with seed.signed_in("root@example.com") as http:
        response = await http.get(f"/api/v1/projects/{uuid.uuid4()}")
        assert response.status_code == 404
        assert response.headers["content-type"] == "application/problem+json"
        assert response.json()["code"] == "project.not_found"
        bad = await http.get("/api/v1/projects/not-a-uuid")
        assert bad.status_code == 422
        assert bad.json()["code"] == "validation_failed"
