"""Cross-site request refusal: the Origin check on every unsafe request, and form tokens."""

from __future__ import annotations

import re

import httpx
import pytest
from z4j.api.v1.cookies import FORM_CSRF

from .conftest import PASSWORD, Seed


@pytest.mark.parametrize(
    "headers",
    [{"Origin": "https://evil.example"}, {"Origin": "null"}, {"Sec-Fetch-Site": "cross-site"}],
)
async def test_foreign_unsafe_requests_are_refused(
    seed: Seed, client: httpx.AsyncClient, headers: dict[str, str]
) -> None:
    await seed.user("ada@example.com")
    response = await client.post(
        "/api/v1/auth/login",
        headers=headers,
        json={"email": "ada@example.com", "password": PASSWORD},
    )
    assert response.status_code == 403
    assert response.json()["code"] == "auth.csrf"
    assert "set-cookie" not in response.headers


@pytest.mark.parametrize(
    "headers", [{}, {"Origin": "http://testserver"}, {"Sec-Fetch-Site": "same-origin"}]
)
async def test_own_and_headerless_requests_pass(
    seed: Seed, client: httpx.AsyncClient, headers: dict[str, str]
) -> None:
    await seed.user("ada@example.com")
    response = await client.post(
        "/api/v1/auth/login",
        headers=headers,
        json={"email": "ada@example.com", "password": PASSWORD},
    )
    assert response.status_code == 200


async def test_foreign_delete_is_refused_even_when_signed_in(seed: Seed) -> None:
    admin = await seed.user("root@example.com", is_admin=True)
    project = await seed.project(admin)
    created = await seed.agent(admin, project)
    async with seed.signed_in("root@example.com") as http:
        response = await http.delete(
            f"/api/v1/projects/{project}/agents/{created.agent['id']}",
            headers={"Origin": "https://evil.example"},
        )
        assert response.status_code == 403
        still = await http.get(f"/api/v1/projects/{project}/agents")
        assert len(still.json()) == 1


def _token(html: str) -> str:
    found = re.search(r'name="csrf_token" value="([^"]+)"', html)
    assert found is not None
    return found.group(1)


async def test_dashboard_forms_need_the_session_token(seed: Seed) -> None:
    await seed.user("root@example.com", is_admin=True)
    async with seed.signed_in("root@example.com") as http:
        missing = await http.post("/projects", data={"name": "no-token"})
        assert missing.status_code == 403
        assert "Cross-site request refused" in missing.text
        wrong = await http.post("/projects", data={"name": "bad", "csrf_token": "x" * 43})
        assert wrong.status_code == 403
        token = _token((await http.get("/projects")).text)
        made = await http.post("/projects", data={"name": "good", "csrf_token": token})
        assert made.status_code == 303
        assert made.headers["location"].startswith("/projects/")


async def test_sign_in_form_uses_a_double_submit_token(
    seed: Seed, client: httpx.AsyncClient
) -> None:
    await seed.user("ada@example.com")
    page = await client.get("/login")
    token = _token(page.text)
    assert client.cookies[FORM_CSRF] == token
    form = {"email": "ada@example.com", "password": PASSWORD, "next": "/projects"}
    refused = await client.post("/login", data={**form, "csrf_token": "forged" * 5})
    assert refused.status_code == 403
    accepted = await client.post("/login", data={**form, "csrf_token": token})
    assert accepted.status_code == 303
    assert accepted.headers["location"] == "/projects"


async def test_sign_in_never_redirects_off_site(seed: Seed, client: httpx.AsyncClient) -> None:
    await seed.user("ada@example.com")
    token = _token((await client.get("/login")).text)
    response = await client.post(
        "/login",
        data={
            "email": "ada@example.com",
            "password": PASSWORD,
            "csrf_token": token,
            "next": "//evil.example/x",
        },
    )
    assert response.headers["location"] == "/projects"
