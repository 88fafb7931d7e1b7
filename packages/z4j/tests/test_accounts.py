"""Brain administrators list, disable and enable accounts (API, dashboard, CLI): a disabled
account cannot sign in, and its sessions and API keys stop at once."""

from __future__ import annotations

import os
import subprocess
import sys

import httpx
import psycopg
from z4j.brain import Brain

from .conftest import PASSWORD, Seed
from .hostile import assert_form_refused, form_token


def _audit(url: str) -> list[tuple[str, object]]:
    with psycopg.connect(url) as conn:
        return conn.execute(
            "SELECT action, details->>'via' FROM audit_log WHERE action LIKE 'user.%%able' "
            "ORDER BY id"
        ).fetchall()


async def test_a_disabled_account_stops_everywhere_at_once(
    seed: Seed, client: httpx.AsyncClient, z4j_database: str
) -> None:
    await seed.user("root@example.com", is_admin=True)
    ada = await seed.user("ada@example.com")
    project = await seed.project(ada)
    async with seed.signed_in("ada@example.com") as session:
        made = await session.post(
            "/api/v1/api-keys", json={"project_id": str(project), "name": "ci", "role": "owner"}
        )
        key = {"Authorization": f"Bearer {made.json()['token']}"}
        assert (await client.get("/api/v1/auth/me", headers=key)).status_code == 200
        async with seed.signed_in("root@example.com") as root:
            listed = (await root.get("/api/v1/users")).json()
            assert {u["email"]: u["is_active"] for u in listed} == {
                "root@example.com": True,
                "ada@example.com": True,
            }
            off = await root.post(f"/api/v1/users/{ada.id}/disable")
            assert off.status_code == 200, off.text
            assert off.json()["is_active"] is False
            assert (await session.get("/api/v1/auth/me")).status_code == 401
            assert (await client.get("/api/v1/auth/me", headers=key)).status_code == 401
            refused = await client.post(
                "/api/v1/auth/login", json={"email": "ada@example.com", "password": PASSWORD}
            )
            assert refused.status_code == 401
            on = await root.post(f"/api/v1/users/{ada.id}/enable")
            assert on.json()["is_active"] is True
            back = await client.post(
                "/api/v1/auth/login", json={"email": "ada@example.com", "password": PASSWORD}
            )
            assert back.status_code == 200
            assert (await client.get("/api/v1/auth/me", headers=key)).status_code == 200
    assert _audit(z4j_database) == [("user.disable", None), ("user.enable", None)]


async def test_only_admins_and_never_oneself_or_the_last_admin(seed: Seed) -> None:
    root = await seed.user("root@example.com", is_admin=True)
    other = await seed.user("other@example.com", is_admin=True)
    ada = await seed.user("ada@example.com")
    async with seed.signed_in("ada@example.com") as http:
        assert (await http.get("/api/v1/users")).status_code == 403
        assert (await http.post(f"/api/v1/users/{root.id}/disable")).status_code == 403
        assert (await http.get("/admin/users")).status_code == 403
    async with seed.signed_in("root@example.com") as http:
        assert (await http.post(f"/api/v1/users/{root.id}/disable")).status_code == 403
        assert (await http.post(f"/api/v1/users/{other.id}/disable")).status_code == 200
        assert (await http.post(f"/api/v1/users/{ada.id}/disable")).status_code == 200
        unknown = await http.post("/api/v1/users/00000000-0000-0000-0000-000000000000/disable")
        assert unknown.status_code == 404
        assert (await http.post("/api/v1/users/nope/disable")).status_code == 422
    async with seed.signed_in("root@example.com") as http:
        enabled = await http.post(f"/api/v1/users/{other.id}/enable")
        assert enabled.status_code == 200


async def test_the_accounts_page(seed: Seed) -> None:
    await seed.user("root@example.com", is_admin=True)
    ada = await seed.user("ada@example.com")
    async with seed.signed_in("root@example.com") as http:
        page = await http.get("/admin/users")
        assert page.status_code == 200
        assert "ada@example.com" in page.text
        csrf = form_token(page.text)
        off = await http.post(f"/admin/users/{ada.id}/disable", data={"csrf_token": csrf})
        assert off.status_code == 200
        assert "ada@example.com is disabled" in off.text
        on = await http.post(f"/admin/users/{ada.id}/enable", data={"csrf_token": csrf})
        assert "ada@example.com is enabled" in on.text
        await assert_form_refused(http, f"/admin/users/{ada.id}/disable", {"csrf_token": csrf})


def _cli(brain: Brain, url: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "Z4J_DATABASE_URL": url, "Z4J_CONFIG_DIR": str(brain.settings.config_dir)}
    return subprocess.run(
        [sys.executable, "-m", "z4j.cli", "users", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


async def test_the_cli_lists_disables_and_enables(
    seed: Seed, brain: Brain, client: httpx.AsyncClient, z4j_database: str
) -> None:
    await seed.user("root@example.com", is_admin=True)
    await seed.user("ada@example.com")
    async with seed.signed_in("ada@example.com") as session:
        listed = _cli(brain, z4j_database, "list")
        assert listed.returncode == 0, listed.stderr
        assert "ada@example.com" in listed.stdout
        off = _cli(brain, z4j_database, "disable", "ADA@example.com")
        assert off.returncode == 0, off.stderr
        assert (await session.get("/api/v1/auth/me")).status_code == 401
        assert "disabled" in _cli(brain, z4j_database, "list").stdout
        on = _cli(brain, z4j_database, "enable", "ada@example.com")
        assert on.returncode == 0, on.stderr
    missing = _cli(brain, z4j_database, "disable", "nobody@example.com")
    assert missing.returncode == 1
    assert missing.stderr.strip().startswith("error: user.not_found")
    last = _cli(brain, z4j_database, "disable", "root@example.com")
    assert last.stderr.strip().startswith("error: user.last_admin")
    assert _audit(z4j_database) == [("user.disable", "cli"), ("user.enable", "cli")]
