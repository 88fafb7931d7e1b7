"""API keys: shown once, stored as HMAC, a role no higher than the owner's and capped at the
owner's current role when used, last use recorded, revocable, and dead with a disabled owner."""

from __future__ import annotations

import uuid

import httpx
import psycopg
from hypothesis import given
from hypothesis import strategies as st
from z4j.domain.api_keys import acting_role, grantable
from z4j.domain.roles import Role

from .conftest import Seed
from .hostile import assert_form_refused, assert_refused, form_token

roles = st.sampled_from(list(Role))


@given(roles, st.one_of(st.none(), roles))
def test_a_key_never_acts_above_its_role_or_its_owner(key: Role, owner: Role | None) -> None:
    acting = acting_role(key, owner)
    if owner is None:
        assert acting is None
    else:
        assert acting is not None
        assert key.at_least(acting)
        assert owner.at_least(acting)
        assert acting in (key, owner)


@given(st.one_of(st.none(), roles), roles)
def test_keys_are_granted_up_to_the_owner(owner: Role | None, wanted: Role) -> None:
    assert grantable(owner, wanted) == (owner is not None and owner.at_least(wanted))


def bearer(client: httpx.AsyncClient, token: str) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        transport=client._transport,
        base_url=client.base_url,
        headers={"Authorization": f"Bearer {token}"},
    )


async def test_a_key_works_as_bearer_within_its_project_and_role(
    seed: Seed, client: httpx.AsyncClient, z4j_database: str
) -> None:
    owner = await seed.user("own@example.com")
    project = await seed.project(owner)
    other = await seed.project(owner)
    op = await seed.user("op@example.com")
    await seed.member(project, op, "operator")
    async with seed.signed_in("op@example.com") as http:
        too_high = await http.post(
            "/api/v1/api-keys", json={"project_id": str(project), "name": "ci", "role": "admin"}
        )
        assert too_high.status_code == 403
        foreign = await http.post(
            "/api/v1/api-keys", json={"project_id": str(other), "name": "ci", "role": "viewer"}
        )
        assert foreign.status_code == 404
        made = await http.post(
            "/api/v1/api-keys", json={"project_id": str(project), "name": "ci", "role": "operator"}
        )
        assert made.status_code == 201, made.text
        token = made.json()["token"]
        assert token.startswith("z4jk_")
        listed = (await http.get("/api/v1/api-keys")).json()
        assert [k["name"] for k in listed] == ["ci"]
        assert token not in str(listed)
        assert listed[0]["last_used_at"] is None
    with psycopg.connect(z4j_database) as conn:
        [(stored,)] = conn.execute("SELECT token_hash FROM api_keys").fetchall()
    assert token not in stored
    async with bearer(client, token) as api:
        me = await api.get("/api/v1/auth/me")
        assert me.status_code == 200
        assert me.json()["email"] == "op@example.com"
        assert me.json()["is_admin"] is False
        assert (await api.get(f"/api/v1/projects/{project}/members")).status_code == 200
        assert (await api.get(f"/api/v1/projects/{other}")).status_code == 404
        listed = (await api.get("/api/v1/projects")).json()
        assert [(p["id"], p["role"]) for p in listed] == [(str(project), "operator")]
        # a key cannot mint keys or change the password
        minted = await api.post(
            "/api/v1/api-keys", json={"project_id": str(project), "name": "x", "role": "viewer"}
        )
        assert minted.status_code == 403
        assert minted.json()["code"] == "auth.session_required"
        # the owner is demoted: the key follows at once
        async with seed.signed_in("own@example.com") as boss:
            demoted = await boss.patch(
                f"/api/v1/projects/{project}/members/{op.id}", json={"role": "viewer"}
            )
            assert demoted.status_code == 200
        listed = (await api.get("/api/v1/projects")).json()
        assert listed[0]["role"] == "viewer"
        invite = await api.post(
            f"/api/v1/projects/{project}/invitations", json={"email": "x@example.com",
                                                            "role": "viewer"},
        )  # fmt: skip
        assert invite.status_code == 403
        left = await api.delete(f"/api/v1/projects/{project}/members/{op.id}")
        assert left.status_code == 204  # any member may leave; the row names the key
    with psycopg.connect(z4j_database) as conn:
        [(details,)] = conn.execute(
            "SELECT details FROM audit_log WHERE action = 'member.remove'"
        ).fetchall()
    assert details["api_key"] == made.json()["key"]["id"]
    with psycopg.connect(z4j_database) as conn:
        [(used,)] = conn.execute("SELECT last_used_at FROM api_keys").fetchall()
    assert used is not None


async def test_revoked_keys_disabled_owners_and_garbage_are_401(
    seed: Seed, client: httpx.AsyncClient, z4j_database: str
) -> None:
    owner = await seed.user("own@example.com")
    project = await seed.project(owner)
    async with seed.signed_in("own@example.com") as http:
        tokens = []
        for name in ("a", "b"):
            made = await http.post(
                "/api/v1/api-keys", json={"project_id": str(project), "name": name,
                                          "role": "viewer"},
            )  # fmt: skip
            tokens.append((made.json()["key"]["id"], made.json()["token"]))
        revoked = await http.delete(f"/api/v1/api-keys/{tokens[0][0]}")
        assert revoked.status_code == 204
        assert (await http.delete(f"/api/v1/api-keys/{tokens[0][0]}")).status_code == 404
        assert (await http.delete(f"/api/v1/api-keys/{uuid.uuid4()}")).status_code == 404
    async with bearer(client, tokens[0][1]) as api:
        answer = await api.get("/api/v1/auth/me")
        assert answer.status_code == 401
        assert answer.json()["code"] == "api_key.invalid"
    async with bearer(client, tokens[1][1]) as api:
        assert (await api.get("/api/v1/auth/me")).status_code == 200
        with psycopg.connect(z4j_database) as conn:
            conn.execute("UPDATE users SET is_active = false")
        assert (await api.get("/api/v1/auth/me")).status_code == 401
    for garbage in ("z4jk_nope", "x" * 5000, tokens[1][1] + "x"):
        async with bearer(client, garbage) as api:
            assert (await api.get("/api/v1/auth/me")).status_code == 401
    with psycopg.connect(z4j_database) as conn:
        found = [r[0] for r in conn.execute("SELECT action FROM audit_log ORDER BY id")]
    assert found.count("api_key.create") == 2
    assert found.count("api_key.revoke") == 1


async def test_another_users_key_cannot_be_revoked(seed: Seed) -> None:
    owner = await seed.user("own@example.com")
    project = await seed.project(owner)
    await seed.member(project, await seed.user("eve@example.com"), "admin")
    async with seed.signed_in("own@example.com") as http:
        made = await http.post(
            "/api/v1/api-keys", json={"project_id": str(project), "name": "a", "role": "viewer"}
        )
        key_id = made.json()["key"]["id"]
    async with seed.signed_in("eve@example.com") as eve:
        assert (await eve.delete(f"/api/v1/api-keys/{key_id}")).status_code == 404
        assert (await eve.get("/api/v1/api-keys")).json() == []


async def test_the_keys_page_shows_the_token_once(seed: Seed) -> None:
    owner = await seed.user("own@example.com")
    project = await seed.project(owner, "shop")
    async with seed.signed_in("own@example.com") as http:
        page = await http.get("/account/api-keys")
        assert page.status_code == 200
        csrf = form_token(page.text)
        made = await http.post(
            "/account/api-keys",
            data={"name": "deploy", "project_id": str(project), "role": "operator",
                  "csrf_token": csrf},
        )  # fmt: skip
        assert made.status_code == 200
        assert 'id="api-key-token">z4jk_' in made.text
        again = await http.get("/account/api-keys")
        assert "z4jk_" in again.text  # the prefix column
        assert 'id="api-key-token"' not in again.text
        bad = await http.post(
            "/account/api-keys",
            data={"name": "x", "project_id": "nope", "role": "viewer", "csrf_token": csrf},
        )
        assert bad.status_code == 422
        await assert_form_refused(
            http, "/account/api-keys", {"name": "x", "project_id": str(project),
                                        "role": "viewer", "csrf_token": csrf},
        )  # fmt: skip
        await assert_refused(
            http, "POST", "/api/v1/api-keys",
            {"name": "x", "project_id": str(project), "role": "viewer"},
        )  # fmt: skip
