"""The kernel's password rule and sign-in throttle in strataplane: weak passwords refused by the
API and by create-admin, back-off after repeated failures (429 with Retry-After, the right
password refused too), unknown accounts answered as wrong passwords, failures and locks
audited."""

from __future__ import annotations

from datetime import timedelta

import psycopg
import pytest
from fastapi import FastAPI
from platformkit.signin import Backoff, SignInThrottle
from platformkit.testing.signin import comparable, unknown_account_checks
from strataplane import cli
from strataplane.actions.context import SIGN_IN_TABLE, Services
from strataplane.testing import PASSWORD, Seed, client_for
from typer.testing import CliRunner

LOGIN = "/api/v1/auth/login"
WEAK = ["", "b", "1234567890", "password12", "qwerty123456", "Qwerty123456"]


@pytest.fixture
async def platform_token(sp_app: FastAPI, sp_app_seed: Seed) -> str:
    await sp_app_seed.user("root", platform_admin=True)
    async with client_for(sp_app) as http:
        login = await http.post(
            LOGIN, json={"username": "root", "password": PASSWORD, "platform": True}
        )
        csrf = login.json()["csrf_token"]
        created = await http.post(
            "/api/v1/platform/tokens", json={"name": "ops"}, headers={"X-CSRF-Token": csrf}
        )
    token: str = created.json()["token"]
    return token


async def test_weak_passwords_are_422_naming_the_field(
    sp_app: FastAPI, platform_token: str
) -> None:
    async with client_for(sp_app, platform_token) as http:
        for password in [*WEAK, "operator.one"]:
            body = {"username": "operator.one", "display_name": "Op", "password": password}
            refused = await http.post("/api/v1/platform/users", json=body)
            assert refused.status_code == 422, (password, refused.text)
            assert refused.headers["content-type"] == "application/problem+json"
            problem = refused.json()
            assert (problem["code"], problem["field"]) == ("password.weak", "password")
        strong = {"username": "operator.one", "display_name": "Op", "password": "x" * 300}
        assert (await http.post("/api/v1/platform/users", json=strong)).status_code == 201


async def test_tenant_members_get_the_same_rule(sp_app_seed: Seed) -> None:
    from strataplane import errors
    from strataplane.actions import members

    tenant, admin = await sp_app_seed.tenant("alpha")
    ctx = sp_app_seed.ctx(admin, tenant.id)
    with pytest.raises(errors.WeakPassword):
        await members.add_member(ctx, username="newcomer", password="password12")


def test_create_admin_refuses_a_weak_password_on_one_line(strataplane_database: str) -> None:
    runner = CliRunner()
    for password in [*WEAK, "root-operator"]:
        args = ["create-admin", "--username", "root-operator", "--password", password]
        result = runner.invoke(cli.app, [*args, "--database-url", strataplane_database])
        assert result.exit_code == 1, (password, result.output)
        assert result.output.startswith("error: password.weak: "), result.output
        assert result.output.count("\n") == 1
    args = ["create-admin", "--username", "root-operator", "--password", PASSWORD]
    result = runner.invoke(cli.app, [*args, "--database-url", strataplane_database])
    assert result.exit_code == 0, result.output
    with psycopg.connect(strataplane_database) as conn:
        count = conn.execute("SELECT count(*) FROM strataplane.app_user").fetchone()
    assert count == (1,)


def use_long_locks(app: FastAPI) -> None:
    # The production rule with a first lock long enough that no test run outlives it.
    services: Services = app.state.services
    services.sign_in = SignInThrottle(SIGN_IN_TABLE, account=Backoff(base=timedelta(minutes=5)))


async def test_repeated_failures_back_off_and_refuse_the_right_password(
    sp_app: FastAPI, sp_app_seed: Seed, strataplane_database: str
) -> None:
    use_long_locks(sp_app)
    await sp_app_seed.user("carol")
    async with client_for(sp_app) as http:
        for _ in range(5):
            wrong = await http.post(LOGIN, json={"username": "carol", "password": "not it at all"})
            assert wrong.status_code == 401
        for password in ("not it at all", PASSWORD):
            held = await http.post(LOGIN, json={"username": "carol", "password": password})
            assert held.status_code == 429, held.text
            assert held.headers["content-type"] == "application/problem+json"
            assert held.json()["code"] == "auth.throttled"
            assert 240 < int(held.headers["retry-after"]) <= 300
        await sp_app_seed.user("dave")
        fine = await http.post(LOGIN, json={"username": "dave", "password": PASSWORD})
        assert fine.status_code == 200
    with psycopg.connect(strataplane_database) as conn:
        actions = conn.execute(
            "SELECT action, details->>'account_failures' FROM strataplane.platform_audit_event "
            "WHERE action LIKE 'session.login_%' ORDER BY id"
        ).fetchall()
    assert actions == [("session.login_failed", str(n)) for n in range(1, 6)] + [
        ("session.login_locked", "5")
    ]


async def test_success_clears_the_account_count(sp_app: FastAPI, sp_app_seed: Seed) -> None:
    use_long_locks(sp_app)
    await sp_app_seed.user("erin")
    async with client_for(sp_app) as http:
        for _round in range(2):
            for _ in range(4):
                wrong = await http.post(LOGIN, json={"username": "erin", "password": "nope nope"})
                assert wrong.status_code == 401
            right = await http.post(LOGIN, json={"username": "erin", "password": PASSWORD})
            assert right.status_code == 200


async def test_an_unknown_account_is_answered_as_a_wrong_password(
    sp_app: FastAPI, sp_app_seed: Seed
) -> None:
    use_long_locks(sp_app)
    await sp_app_seed.user("frank")
    async with client_for(sp_app) as http:
        before = unknown_account_checks()
        missing = await http.post(LOGIN, json={"username": "nobody", "password": "guess guess"})
        assert unknown_account_checks() == before + 1
        wrong = await http.post(LOGIN, json={"username": "frank", "password": "guess guess"})
        assert unknown_account_checks() == before + 1
        assert comparable(missing)[0] == 401
        assert comparable(missing) == comparable(wrong)
        for name in ("nobody", "frank"):
            for _ in range(4):
                await http.post(LOGIN, json={"username": name, "password": "guess guess"})
        locked = [
            await http.post(LOGIN, json={"username": name, "password": "guess guess"})
            for name in ("nobody", "frank")
        ]
        assert comparable(locked[0])[0] == 429
        assert comparable(locked[0]) == comparable(locked[1])
