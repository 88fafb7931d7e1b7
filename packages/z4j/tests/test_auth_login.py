"""Signing in and out, session cookies, sliding expiry, and password rehash on login."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import httpx
import psycopg
import pytest
from platformkit.passwords import PasswordPolicy, hash_password, verify_password
from z4j.actions.sessions import EXTEND_AFTER
from z4j.api.v1.cookies import SESSION

from .conftest import PASSWORD, Seed


async def test_login_sets_an_httponly_lax_cookie_and_me_answers(
    seed: Seed, client: httpx.AsyncClient
) -> None:
    await seed.user("ada@example.com")
    response = await client.post(
        "/api/v1/auth/login", json={"email": " Ada@Example.com ", "password": PASSWORD}
    )
    assert response.status_code == 200
    assert response.json()["email"] == "ada@example.com"
    cookie = response.headers["set-cookie"]
    assert cookie.startswith(f"{SESSION}=")
    assert "HttpOnly" in cookie
    assert "SameSite=lax" in cookie
    assert "Path=/" in cookie
    assert "Secure" not in cookie
    me = await client.get("/api/v1/auth/me")
    assert me.status_code == 200
    assert me.json()["email"] == "ada@example.com"


async def test_secure_cookies_setting_marks_the_cookie_secure(
    seed: Seed, client: httpx.AsyncClient
) -> None:
    await seed.user("ada@example.com")
    seed.brain.settings.secure_cookies = True
    response = await client.post(
        "/api/v1/auth/login", json={"email": "ada@example.com", "password": PASSWORD}
    )
    assert "Secure" in response.headers["set-cookie"]


async def test_an_https_public_url_or_request_marks_the_cookie_secure(
    seed: Seed, client: httpx.AsyncClient
) -> None:
    await seed.user("ada@example.com")
    body = {"email": "ada@example.com", "password": PASSWORD}
    seed.brain.settings.public_url = "https://z4j.example"
    assert "Secure" in (await client.post("/api/v1/auth/login", json=body)).headers["set-cookie"]
    seed.brain.settings.public_url = None
    over_tls = str(client.base_url.copy_with(scheme="https")) + "/api/v1/auth/login"
    response = await client.post(over_tls, json=body)
    assert response.status_code == 200, response.text
    assert "Secure" in response.headers["set-cookie"]


@pytest.mark.parametrize(
    ("email", "password"),
    [("ada@example.com", "wrong password!"), ("nobody@example.com", PASSWORD)],
)
async def test_bad_credentials_answer_the_same_problem(
    seed: Seed, client: httpx.AsyncClient, email: str, password: str
) -> None:
    await seed.user("ada@example.com")
    response = await client.post("/api/v1/auth/login", json={"email": email, "password": password})
    assert response.status_code == 401
    assert response.headers["content-type"] == "application/problem+json"
    body = response.json()
    assert body["code"] == "auth.invalid_credentials"
    assert "set-cookie" not in response.headers
    assert "email" not in body  # nothing tells which part was wrong


async def test_api_requires_a_session(client: httpx.AsyncClient) -> None:
    response = await client.get("/api/v1/projects")
    assert response.status_code == 401
    assert response.json()["code"] == "auth.required"


async def test_logout_ends_the_session_server_side(
    seed: Seed, client: httpx.AsyncClient, z4j_database: str
) -> None:
    await seed.user("ada@example.com")
    await client.post("/api/v1/auth/login", json={"email": "ada@example.com", "password": PASSWORD})
    stolen = client.cookies[SESSION]
    assert (await client.post("/api/v1/auth/logout")).status_code == 204
    assert SESSION not in client.cookies
    replay = await client.get("/api/v1/auth/me", headers={"Cookie": f"{SESSION}={stolen}"})
    assert replay.status_code == 401
    with psycopg.connect(z4j_database) as conn:
        assert conn.execute("SELECT count(*) FROM sessions").fetchone() == (0,)
        actions = [r[0] for r in conn.execute("SELECT action FROM audit_log ORDER BY id")]
    assert actions == ["auth.login", "auth.logout"]


async def test_the_table_holds_no_usable_cookie(
    seed: Seed, client: httpx.AsyncClient, z4j_database: str
) -> None:
    await seed.user("ada@example.com")
    await client.post("/api/v1/auth/login", json={"email": "ada@example.com", "password": PASSWORD})
    session_id, secret = client.cookies[SESSION].split(".")
    with psycopg.connect(z4j_database) as conn:
        row = conn.execute("SELECT id::text, data::text FROM sessions").fetchone()
    assert row is not None
    assert row[0] == session_id
    assert secret not in row[1]
    assert "secret_hash" in row[1]
    forged = await client.get(
        "/api/v1/auth/me", headers={"Cookie": f"{SESSION}={session_id}.{'A' * 43}"}
    )
    assert forged.status_code == 401


@pytest.mark.parametrize("value", ["", "garbage", "a.b", "0" * 36 + ".x", "." * 80])
async def test_malformed_cookies_are_anonymous(client: httpx.AsyncClient, value: str) -> None:
    response = await client.get("/api/v1/auth/me", headers={"Cookie": f"{SESSION}={value}"})
    assert response.status_code == 401


def _expiry(url: str) -> datetime:
    with psycopg.connect(url) as conn:
        row = conn.execute("SELECT expires_at FROM sessions").fetchone()
    assert row is not None
    value: datetime = row[0]
    return value


async def test_sessions_slide_at_most_once_an_hour(
    seed: Seed, client: httpx.AsyncClient, z4j_database: str
) -> None:
    await seed.user("ada@example.com")
    await client.post("/api/v1/auth/login", json={"email": "ada@example.com", "password": PASSWORD})
    first = _expiry(z4j_database)
    assert abs(first - (datetime.now(UTC) + timedelta(days=14))) < timedelta(minutes=1)
    quiet = await client.get("/api/v1/auth/me")
    assert "set-cookie" not in quiet.headers
    assert _expiry(z4j_database) == first
    # Pretend the last extension was more than an hour ago.
    with psycopg.connect(z4j_database) as conn:
        conn.execute(
            "UPDATE sessions SET expires_at = expires_at - %s",
            (EXTEND_AFTER + timedelta(minutes=1),),
        )
    slid = await client.get("/api/v1/auth/me")
    assert slid.status_code == 200
    assert _expiry(z4j_database) > first - timedelta(seconds=1)
    assert slid.headers["set-cookie"].startswith(f"{SESSION}=")
    assert "Max-Age=1209" in slid.headers["set-cookie"]  # 14 days = 1209600 s


async def test_an_expired_session_is_refused(
    seed: Seed, client: httpx.AsyncClient, z4j_database: str
) -> None:
    await seed.user("ada@example.com")
    await client.post("/api/v1/auth/login", json={"email": "ada@example.com", "password": PASSWORD})
    with psycopg.connect(z4j_database) as conn:
        conn.execute("UPDATE sessions SET expires_at = now() - interval '1 second'")
    assert (await client.get("/api/v1/auth/me")).status_code == 401


async def test_login_rehashes_a_hash_made_under_another_policy(
    seed: Seed, client: httpx.AsyncClient, z4j_database: str
) -> None:
    user = await seed.user("ada@example.com")
    old = hash_password(PASSWORD, PasswordPolicy(time_cost=1, memory_cost=16, parallelism=1))
    with psycopg.connect(z4j_database) as conn:
        conn.execute("UPDATE users SET password_hash = %s WHERE id = %s", (old, user.id))
    response = await client.post(
        "/api/v1/auth/login", json={"email": "ada@example.com", "password": PASSWORD}
    )
    assert response.status_code == 200
    with psycopg.connect(z4j_database) as conn:
        row = conn.execute("SELECT password_hash FROM users WHERE id = %s", (user.id,)).fetchone()
    assert row is not None
    assert row[0] != old
    assert row[0].startswith("$argon2id$")
    assert verify_password(PASSWORD, row[0], seed_policy())


def seed_policy() -> PasswordPolicy:
    from z4j.actions.users import password_policy

    return password_policy()
