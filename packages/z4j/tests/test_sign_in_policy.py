"""The kernel's password rule and sign-in throttle in the brain: weak passwords refused by the
API, the setup page and ``z4j serve --admin-password``; back-off after repeated failures (429
with Retry-After, the right password refused too) in the API and the dashboard; unknown
accounts answered as wrong passwords; failures and locks audited."""

from __future__ import annotations

import re
from datetime import timedelta

import httpx
import psycopg
import pytest
from platformkit.signin import Backoff, SignInThrottle
from platformkit.testing.signin import comparable, unknown_account_checks
from typer.testing import CliRunner
from z4j import cli
from z4j.actions import users
from z4j.actions.errors import WeakPassword
from z4j.brain import SIGN_IN_TABLE, Brain

from .conftest import PASSWORD, Seed

LOGIN = "/api/v1/auth/login"
WEAK = ["", "b", "1234567890", "password12", "qwerty123456", "QWERTY123456"]


@pytest.fixture
def long_locks(brain: Brain) -> None:
    # The production rule with a first lock long enough that no test run outlives it.
    brain.sign_in = SignInThrottle(SIGN_IN_TABLE, account=Backoff(base=timedelta(minutes=5)))


async def test_weak_passwords_are_422_naming_the_field(seed: Seed) -> None:
    await seed.user("root@example.com", is_admin=True)
    async with seed.signed_in("root@example.com") as http:
        for password in [*WEAK, "Newcomer@example.com", "newcomer"]:
            body = {"email": "newcomer@example.com", "password": password}
            refused = await http.post("/api/v1/users", json=body)
            assert refused.status_code == 422, (password, refused.text)
            assert refused.headers["content-type"] == "application/problem+json"
            problem = refused.json()
            assert (problem["code"], problem["field"]) == ("password.weak", "password")
        body = {"email": "newcomer@example.com", "password": "é" * 12}
        assert (await http.post("/api/v1/users", json=body)).status_code == 201


async def test_setup_refuses_a_weak_first_admin(brain: Brain) -> None:
    token = users.setup_token(brain)
    with pytest.raises(WeakPassword):
        await users.complete_setup(brain, token, "root@example.com", "password12")
    with pytest.raises(WeakPassword):
        await users.create_first_admin(brain, "root@example.com", "1234567890")
    assert not await users.has_users(brain)


def test_serve_refuses_a_weak_admin_password_on_one_line() -> None:
    runner = CliRunner()
    for password in ("password12", "qwerty123456"):
        args = ["serve", "--admin-email", "a@example.com", "--admin-password", password]
        result = runner.invoke(cli.app, args)
        assert result.exit_code == 1, result.output
        assert result.output.startswith("error: password.weak: "), result.output
        assert result.output.count("\n") == 1


@pytest.mark.usefixtures("long_locks")
async def test_repeated_failures_back_off_and_refuse_the_right_password(
    seed: Seed, client: httpx.AsyncClient, z4j_database: str
) -> None:
    ada = await seed.user("ada@example.com")
    for _ in range(5):
        wrong = await client.post(LOGIN, json={"email": "ada@example.com", "password": "no no no"})
        assert wrong.status_code == 401
    for email, password in (("ada@example.com", "no no no"), (" ADA@example.com", PASSWORD)):
        held = await client.post(LOGIN, json={"email": email, "password": password})
        assert held.status_code == 429, held.text
        assert held.headers["content-type"] == "application/problem+json"
        assert held.json()["code"] == "auth.throttled"
        assert 240 < int(held.headers["retry-after"]) <= 300
    form = await client.get("/login")
    csrf = re.search(r'name="csrf_token" value="([^"]+)"', form.text)
    assert csrf is not None
    page = await client.post(
        "/login",
        data={"email": "ada@example.com", "password": PASSWORD, "csrf_token": csrf.group(1)},
    )
    assert page.status_code == 429
    assert int(page.headers["retry-after"]) > 240
    assert "Too many failed sign-ins" in page.text
    await seed.user("bob@example.com")
    fine = await client.post(LOGIN, json={"email": "bob@example.com", "password": PASSWORD})
    assert fine.status_code == 200
    with psycopg.connect(z4j_database) as conn:
        rows = conn.execute(
            "SELECT action, target_id, details->>'account_failures' FROM audit_log "
            "WHERE action LIKE 'auth.login_%' ORDER BY id"
        ).fetchall()
    assert rows == [("auth.login_failed", ada.id, str(n)) for n in range(1, 6)] + [
        ("auth.login_locked", ada.id, "5")
    ]


@pytest.mark.usefixtures("long_locks")
async def test_success_clears_the_account_count(seed: Seed, client: httpx.AsyncClient) -> None:
    await seed.user("cy@example.com")
    for _round in range(2):
        for _ in range(4):
            wrong = await client.post(LOGIN, json={"email": "cy@example.com", "password": "nope!"})
            assert wrong.status_code == 401
        right = await client.post(LOGIN, json={"email": "cy@example.com", "password": PASSWORD})
        assert right.status_code == 200


@pytest.mark.usefixtures("long_locks")
async def test_an_unknown_account_is_answered_as_a_wrong_password(
    seed: Seed, client: httpx.AsyncClient
) -> None:
    await seed.user("dee@example.com")
    attempt = {"password": "guess guess"}
    before = unknown_account_checks()
    missing = await client.post(LOGIN, json={"email": "nobody@example.com", **attempt})
    assert unknown_account_checks() == before + 1
    wrong = await client.post(LOGIN, json={"email": "dee@example.com", **attempt})
    assert unknown_account_checks() == before + 1
    assert comparable(missing)[0] == 401
    assert comparable(missing) == comparable(wrong)
    for email in ("nobody@example.com", "dee@example.com"):
        for _ in range(4):
            await client.post(LOGIN, json={"email": email, **attempt})
    locked = [
        await client.post(LOGIN, json={"email": email, **attempt})
        for email in ("nobody@example.com", "dee@example.com")
    ]
    assert comparable(locked[0])[0] == 429
    assert comparable(locked[0]) == comparable(locked[1])
