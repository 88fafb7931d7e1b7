"""Password reset by mailed link and password change, through the API, on real PostgreSQL
with the mail going to a real SMTP server on loopback (aiosmtpd)."""

from __future__ import annotations

import email
import re
from collections.abc import Iterator
from email import policy

import httpx
import psycopg
import pytest
from platformkit.testing.smtp import SmtpInbox, smtp_server
from z4j.brain import Brain
from z4j.testing import wait_for

from .conftest import PASSWORD, Seed
from .hostile import assert_refused

NEW = "a fresh and long passphrase"
_LINK = re.compile(r"https?://\S+/reset-password/(z4jr_[A-Za-z0-9_-]+)")


@pytest.fixture
def inbox(brain: Brain) -> Iterator[SmtpInbox]:
    with smtp_server() as server:
        brain.settings.smtp_host, brain.settings.smtp_port = "127.0.0.1", server.port
        brain.settings.smtp_security = brain.settings.smtp_security.NONE
        yield server


def tokens(inbox: SmtpInbox) -> list[str]:
    found = []
    for envelope in inbox.received:
        raw = envelope.content if isinstance(envelope.content, bytes) else b""
        body = email.message_from_bytes(raw, policy=policy.default).get_body()
        assert body is not None
        match = _LINK.search(body.get_content())
        assert match is not None
        found.append(match.group(1))
    return found


async def mailed(inbox: SmtpInbox, count: int) -> list[str]:
    async def arrived() -> bool:
        return len(inbox.received) >= count

    assert await wait_for(arrived, within=60)
    return tokens(inbox)


def actions(url: str) -> list[str]:
    with psycopg.connect(url) as conn:
        return [r[0] for r in conn.execute("SELECT action FROM audit_log ORDER BY id")]


async def test_a_reset_link_works_once_within_the_hour_and_ends_every_session(
    seed: Seed, client: httpx.AsyncClient, inbox: SmtpInbox, z4j_database: str
) -> None:
    await seed.user("ada@example.com")
    async with seed.signed_in("ada@example.com") as old_session:
        unknown = await client.post(
            "/api/v1/auth/password-reset", json={"email": "nobody-here@example.com"}
        )
        known = await client.post("/api/v1/auth/password-reset", json={"email": "ADA@example.com"})
        assert unknown.status_code == known.status_code == 202
        assert unknown.json() == known.json()
        [token] = await mailed(inbox, 1)
        assert inbox.received[0].rcpt_tos == ["ada@example.com"]
        with psycopg.connect(z4j_database) as conn:
            stored = conn.execute("SELECT token_hash, expires_at - created_at FROM "
                                  "password_reset_tokens").fetchall()  # fmt: skip
        assert len(stored) == 1
        assert token not in stored[0][0]
        assert 3590 <= stored[0][1].total_seconds() <= 3610
        weak = await client.post(
            "/api/v1/auth/password-reset/confirm", json={"token": token, "password": "short"}
        )
        assert weak.status_code == 422
        assert weak.json()["field"] == "password"
        done = await client.post(
            "/api/v1/auth/password-reset/confirm", json={"token": token, "password": NEW}
        )
        assert done.status_code == 204, done.text
        assert (await old_session.get("/api/v1/auth/me")).status_code == 401
    again = await client.post(
        "/api/v1/auth/password-reset/confirm", json={"token": token, "password": NEW + "x"}
    )
    assert again.status_code == 404
    assert again.json()["code"] == "password_reset.not_found"
    old = await client.post(
        "/api/v1/auth/login", json={"email": "ada@example.com", "password": PASSWORD}
    )
    assert old.status_code == 401
    new = await client.post(
        "/api/v1/auth/login", json={"email": "ada@example.com", "password": NEW}
    )
    assert new.status_code == 200
    assert "password.reset_request" in actions(z4j_database)
    assert "password.reset" in actions(z4j_database)


async def test_an_expired_or_replaced_link_does_not_work(
    seed: Seed, client: httpx.AsyncClient, inbox: SmtpInbox, z4j_database: str
) -> None:
    await seed.user("ada@example.com")
    for _ in range(3):
        await client.post("/api/v1/auth/password-reset", json={"email": "ada@example.com"})
        with psycopg.connect(z4j_database) as conn:  # the minute between two mails passes
            conn.execute("UPDATE password_reset_tokens SET created_at = created_at - "
                         "interval '61 seconds' WHERE used_at IS NULL")  # fmt: skip
    first, _second, third = await mailed(inbox, 3)
    replaced = await client.post(
        "/api/v1/auth/password-reset/confirm", json={"token": first, "password": NEW}
    )
    assert replaced.status_code == 404
    with psycopg.connect(z4j_database) as conn:
        conn.execute("UPDATE password_reset_tokens SET expires_at = now() - interval '1 second'")
    expired = await client.post(
        "/api/v1/auth/password-reset/confirm", json={"token": third, "password": NEW}
    )
    assert expired.status_code == 404
    for hostile in ("z4jr_" + "A" * 43, "x", "z4jr_\u00e9" * 9):
        answer = await client.post(
            "/api/v1/auth/password-reset/confirm", json={"token": hostile, "password": NEW}
        )
        assert answer.status_code == 404


async def test_at_most_one_mail_a_minute_per_account(
    seed: Seed, client: httpx.AsyncClient, inbox: SmtpInbox, z4j_database: str
) -> None:
    await seed.user("ada@example.com")
    answers = [
        await client.post("/api/v1/auth/password-reset", json={"email": "ada@example.com"})
        for _ in range(5)
    ]
    assert {a.status_code for a in answers} == {202}
    await mailed(inbox, 1)
    with psycopg.connect(z4j_database) as conn:
        assert conn.execute("SELECT count(*) FROM password_reset_tokens").fetchone() == (1,)
        requests = conn.execute(
            "SELECT count(*) FROM audit_log WHERE action = 'password.reset_request'"
        ).fetchone()
    assert requests == (1,)
    assert len(inbox.received) == 1


async def test_a_disabled_account_gets_no_mail(
    seed: Seed, client: httpx.AsyncClient, inbox: SmtpInbox, z4j_database: str
) -> None:
    await seed.user("ada@example.com")
    with psycopg.connect(z4j_database) as conn:
        conn.execute("UPDATE users SET is_active = false")
    answer = await client.post("/api/v1/auth/password-reset", json={"email": "ada@example.com"})
    assert answer.status_code == 202
    with psycopg.connect(z4j_database) as conn:
        assert conn.execute("SELECT count(*) FROM password_reset_tokens").fetchone() == (0,)
    assert inbox.received == []


async def test_changing_the_password_needs_the_current_one_and_ends_other_sessions(
    seed: Seed, z4j_database: str
) -> None:
    await seed.user("ada@example.com")
    async with seed.signed_in("ada@example.com") as other, seed.signed_in("ada@example.com") as me:
        wrong = await me.post(
            "/api/v1/auth/password", json={"current_password": "guess", "new_password": NEW}
        )
        assert wrong.status_code == 422
        assert wrong.json()["code"] == "password.wrong"
        assert wrong.json()["field"] == "current_password"
        weak = await me.post(
            "/api/v1/auth/password",
            json={"current_password": PASSWORD, "new_password": "ada@example.com"},
        )
        assert weak.status_code == 422
        assert weak.json()["field"] == "new_password"
        changed = await me.post(
            "/api/v1/auth/password", json={"current_password": PASSWORD, "new_password": NEW}
        )
        assert changed.status_code == 204, changed.text
        assert (await me.get("/api/v1/auth/me")).status_code == 200
        assert (await other.get("/api/v1/auth/me")).status_code == 401
    found = actions(z4j_database)
    assert "password.change_failed" in found
    assert found[-1] == "password.change"


async def test_wrong_current_passwords_are_throttled(seed: Seed) -> None:
    await seed.user("ada@example.com")
    async with seed.signed_in("ada@example.com") as me:
        codes = []
        for _ in range(7):
            answer = await me.post(
                "/api/v1/auth/password", json={"current_password": "guess", "new_password": NEW}
            )
            codes.append(answer.status_code)
    assert codes[:5] == [422] * 5
    assert codes[-1] == 429


async def test_hostile_bodies_are_refused_with_4xx(seed: Seed, client: httpx.AsyncClient) -> None:
    await seed.user("ada@example.com")
    await assert_refused(client, "POST", "/api/v1/auth/password-reset", {"email": "a@example.com"})
    await assert_refused(
        client, "POST", "/api/v1/auth/password-reset/confirm", {"token": "z4jr_x", "password": NEW}
    )
    async with seed.signed_in("ada@example.com") as me:
        await assert_refused(
            me, "POST", "/api/v1/auth/password", {"current_password": "x", "new_password": NEW}
        )
