"""Two-factor sign-in: TOTP enrolment with recovery codes, the code step of sign-in (throttled,
no replay), turning it off, and projects that require it (pages, API and API keys)."""

from __future__ import annotations

import time
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import psycopg
from hypothesis import given, settings
from hypothesis import strategies as st
from z4j.domain import totp

from .conftest import PASSWORD, Seed
from .hostile import assert_form_refused, assert_refused, form_token

SECRET = totp.new_secret()


def step_now() -> int:
    return int(time.time() // totp.STEP_SECONDS)


@settings(max_examples=50)
@given(st.integers(-5, 5), st.one_of(st.none(), st.integers(-5, 5)))
def test_a_code_is_accepted_near_now_and_only_after_the_last_step(
    offset: int, last: int | None
) -> None:
    now = 1_800_000_000.0
    current = int(now // totp.STEP_SECONDS)
    step = current + offset
    last_step = None if last is None else current + last
    found = totp.accepted_step(SECRET, totp.code_at(SECRET, step), now, last_step)
    if abs(offset) > totp.DRIFT_STEPS or (last_step is not None and step <= last_step):
        # another step in the window may share the code by chance; it is never the old one
        assert found is None or found != step or (last_step is None or found > last_step)
    else:
        assert found is not None
        assert last_step is None or found > last_step


@given(st.text(max_size=20))
def test_garbage_is_never_a_code(text: str) -> None:
    if not (len(text.strip()) == 6 and text.strip().isdigit()):
        assert totp.accepted_step(SECRET, text, time.time(), None) is None


def test_recovery_codes_read_forgivingly() -> None:
    codes = totp.new_recovery_codes()
    assert len(set(codes)) == 10
    for code in codes:
        assert totp.normalize_recovery(f"  {code.upper()} ") == code.replace("-", "")
    assert totp.normalize_recovery("short") is None
    assert totp.normalize_recovery("0000000000") is None  # 0 and 1 are not base32


async def enrol(http: httpx.AsyncClient) -> tuple[str, list[str]]:
    started = await http.post("/api/v1/auth/mfa/enrol")
    assert started.status_code == 200, started.text
    secret = started.json()["secret"]
    uri = urlsplit(started.json()["otpauth_uri"])
    assert uri.scheme == "otpauth"
    assert parse_qs(uri.query)["secret"] == [secret]
    assert parse_qs(uri.query)["issuer"] == ["z4j"]
    wrong = await http.post("/api/v1/auth/mfa/confirm", json={"code": "000000"})
    if totp.code_at(secret, step_now()) != "000000":
        assert wrong.status_code == 422
        assert wrong.json()["code"] == "mfa.code_invalid"
    confirmed = await http.post(
        "/api/v1/auth/mfa/confirm", json={"code": totp.code_at(secret, step_now() - 1)}
    )
    assert confirmed.status_code == 200, confirmed.text
    codes = confirmed.json()["recovery_codes"]
    assert len(codes) == 10
    return secret, codes


async def sign_in(client: httpx.AsyncClient, email: str) -> dict[str, Any]:
    answer = await client.post("/api/v1/auth/login", json={"email": email, "password": PASSWORD})
    assert answer.status_code == 200, answer.text
    body: dict[str, Any] = answer.json()
    return body


async def test_enrol_then_sign_in_with_a_code_or_a_recovery_code(
    seed: Seed, client: httpx.AsyncClient, z4j_database: str
) -> None:
    await seed.user("ada@example.com")
    async with (
        seed.signed_in("ada@example.com") as other,
        seed.signed_in("ada@example.com") as http,
    ):
        assert (await http.get("/api/v1/auth/mfa")).json()["enabled"] is False
        secret, codes = await enrol(http)
        assert (await other.get("/api/v1/auth/me")).status_code == 401  # signed in without a code
        assert (await http.get("/api/v1/auth/me")).status_code == 200
        assert (await http.get("/api/v1/auth/mfa")).json() == {
            "enabled": True,
            "pending": False,
            "recovery_left": 10,
        }
        again = await http.post("/api/v1/auth/mfa/enrol")
        assert again.status_code == 409
    with psycopg.connect(z4j_database) as conn:
        [(sealed,)] = conn.execute("SELECT secret FROM user_mfa").fetchall()
        hashes = [r[0] for r in conn.execute("SELECT code_hash FROM mfa_recovery_codes")]
    assert secret.encode() not in bytes(sealed)
    assert not any(c.replace("-", "") in h for c in codes for h in hashes)

    assert (await sign_in(client, "ada@example.com"))["mfa_required"] is True
    assert (await client.get("/api/v1/auth/me")).status_code == 401  # not signed in yet
    bad = await client.post("/api/v1/auth/login/mfa", json={"code": "12345x"})
    assert bad.status_code == 422
    code = totp.code_at(secret, step_now() + 1)
    done = await client.post("/api/v1/auth/login/mfa", json={"code": code})
    assert done.status_code == 200, done.text
    assert (await client.get("/api/v1/auth/me")).json()["email"] == "ada@example.com"

    async with httpx.AsyncClient(transport=client._transport, base_url=client.base_url) as other:
        await sign_in(other, "ada@example.com")
        replay = await other.post("/api/v1/auth/login/mfa", json={"code": code})
        assert replay.status_code == 422  # the same code does not work twice
        used = await other.post("/api/v1/auth/login/mfa", json={"code": codes[0].upper()})
        assert used.status_code == 200
    async with httpx.AsyncClient(transport=client._transport, base_url=client.base_url) as third:
        await sign_in(third, "ada@example.com")
        twice = await third.post("/api/v1/auth/login/mfa", json={"code": codes[0]})
        assert twice.status_code == 422
        no_session = await third.post("/api/v1/auth/mfa/disable", json={"code": codes[1]})
        assert no_session.status_code == 401
    fresh = await client.post("/api/v1/auth/mfa/recovery-codes", json={"code": codes[1]})
    assert fresh.status_code == 200
    assert (await client.get("/api/v1/auth/mfa")).json()["recovery_left"] == 10
    stale = await client.post("/api/v1/auth/mfa/disable", json={"code": codes[2]})
    assert stale.status_code == 422
    off = await client.post(
        "/api/v1/auth/mfa/disable", json={"code": fresh.json()["recovery_codes"][0]}
    )
    assert off.status_code == 204
    assert (await sign_in(client, "ada@example.com"))["mfa_required"] is False
    with psycopg.connect(z4j_database) as conn:
        actions = [r[0] for r in conn.execute("SELECT action FROM audit_log ORDER BY id")]
    for expected in ("mfa.enrol_start", "mfa.enable", "mfa.recovery_used",
                     "mfa.recovery_regenerate", "mfa.disable"):  # fmt: skip
        assert expected in actions


async def test_wrong_codes_are_throttled_with_the_sign_in_throttle(
    seed: Seed, client: httpx.AsyncClient, z4j_database: str
) -> None:
    await seed.user("ada@example.com")
    async with seed.signed_in("ada@example.com") as http:
        secret, _codes = await enrol(http)
    await sign_in(client, "ada@example.com")
    wrong = next(f"{n:06d}" for n in range(10) if f"{n:06d}" not in
                 {totp.code_at(secret, step_now() + d) for d in (-1, 0, 1, 2)})  # fmt: skip
    answers = [
        (await client.post("/api/v1/auth/login/mfa", json={"code": wrong})).status_code
        for _ in range(6)
    ]
    assert answers[:5] == [422] * 5
    assert answers[-1] == 429
    right = await client.post(
        "/api/v1/auth/login/mfa", json={"code": totp.code_at(secret, step_now())}
    )
    assert right.status_code == 429  # locked: even the right code waits
    with psycopg.connect(z4j_database) as conn:
        failed = conn.execute(
            "SELECT count(*) FROM audit_log WHERE action = 'auth.mfa_failed'"
        ).fetchone()
    assert failed == (5,)


async def test_a_project_can_require_two_factor_sign_in(
    seed: Seed, client: httpx.AsyncClient
) -> None:
    owner = await seed.user("own@example.com")
    project = await seed.project(owner)
    await seed.member(project, await seed.user("op@example.com"), "operator")
    async with seed.signed_in("op@example.com") as op:
        made = await op.post(
            "/api/v1/api-keys", json={"project_id": str(project), "name": "k", "role": "viewer"}
        )
        key = {"Authorization": f"Bearer {made.json()['token']}"}
        async with seed.signed_in("own@example.com") as boss:
            first = await boss.put(f"/api/v1/projects/{project}/require-mfa",
                                   json={"required": True})  # fmt: skip
            assert first.status_code == 409  # the owner has none yet
            await enrol(boss)
            by_op = await op.put(f"/api/v1/projects/{project}/require-mfa",
                                 json={"required": True})  # fmt: skip
            assert by_op.status_code == 403
            on = await boss.put(f"/api/v1/projects/{project}/require-mfa", json={"required": True})
            assert on.status_code == 204
            assert (await boss.get(f"/api/v1/projects/{project}")).status_code == 200
        refused = await op.get(f"/api/v1/projects/{project}/tasks")
        assert refused.status_code == 403
        assert refused.json()["code"] == "mfa.required"
        assert "/account" in refused.json()["detail"]
        page = await op.get(f"/projects/{project}")
        assert page.status_code == 403
        assert "two-factor" in page.text
        assert 'href="/account#mfa"' in page.text
        assert (await client.get(f"/api/v1/projects/{project}", headers=key)).status_code == 403
        await enrol(op)
        assert (await op.get(f"/api/v1/projects/{project}/tasks")).status_code == 200
        assert (await client.get(f"/api/v1/projects/{project}", headers=key)).status_code == 200


async def test_the_dashboard_sign_in_asks_for_the_code(
    seed: Seed, client: httpx.AsyncClient
) -> None:
    await seed.user("ada@example.com")
    async with seed.signed_in("ada@example.com") as http:
        account = await http.get("/account")
        csrf = form_token(account.text)
        started = await http.post("/account/mfa/start", data={"csrf_token": csrf})
        assert 'id="mfa-secret"' in started.text
        secret = started.text.split('id="mfa-secret">')[1].split("<")[0]
        confirmed = await http.post(
            "/account/mfa/confirm",
            data={"csrf_token": csrf, "code": totp.code_at(secret, step_now() - 1)},
        )
        assert 'id="recovery-codes"' in confirmed.text
        await assert_form_refused(http, "/account/mfa/confirm", {"code": "1", "csrf_token": csrf})
        await assert_refused(http, "POST", "/api/v1/auth/mfa/disable", {"code": "123456"})
    login = await client.get("/login")
    form = {"email": "ada@example.com", "password": PASSWORD, "csrf_token": form_token(login.text),
            "next": "/account"}  # fmt: skip
    first = await client.post("/login", data=form)
    assert first.status_code == 303
    assert first.headers["location"].startswith("/login/mfa")
    assert (await client.get("/account")).status_code == 303  # not signed in yet
    page = await client.get(first.headers["location"])
    assert "ada@example.com" in page.text
    wrong = await client.post(
        "/login/mfa", data={"code": "abc", "next": "/account", "csrf_token": form["csrf_token"]}
    )
    assert wrong.status_code == 422
    done = await client.post(
        "/login/mfa",
        data={"code": totp.code_at(secret, step_now() + 1), "next": "/account",
              "csrf_token": form["csrf_token"]},
    )  # fmt: skip
    assert done.status_code == 303
    assert done.headers["location"] == "/account"
    assert (await client.get("/account")).status_code == 200
    await assert_refused(client, "POST", "/api/v1/auth/login/mfa", {"code": "123456"})
