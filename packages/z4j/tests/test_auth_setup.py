"""The first administrator: the CLI path (create_first_admin) and the one-time setup page."""

from __future__ import annotations

import re

import httpx
import psycopg
from z4j.actions import users
from z4j.brain import Brain


async def test_create_first_admin_is_idempotent(brain: Brain, z4j_database: str) -> None:
    assert not await users.has_users(brain)
    assert await users.create_first_admin(brain, "Root@Example.com", "a long password")
    assert not await users.create_first_admin(brain, "root@example.com", "another password")
    assert await users.has_users(brain)
    with psycopg.connect(z4j_database) as conn:
        user = conn.execute("SELECT email, is_admin, password_hash FROM users").fetchall()
        project = conn.execute(
            "SELECT p.name, m.role::text FROM projects p JOIN memberships m ON m.project_id = p.id"
        ).fetchall()
        actions = [r[0] for r in conn.execute("SELECT action FROM audit_log ORDER BY id")]
    assert len(user) == 1
    assert user[0][:2] == ("root@example.com", True)
    assert user[0][2].startswith("$argon2id$")
    assert project == [("default", "owner")]
    assert actions == ["project.create", "user.create_admin"]


def _field(html: str, name: str) -> str:
    found = re.search(rf'name="{name}" value="([^"]*)"', html)
    assert found is not None
    return found.group(1)


async def test_setup_page_works_once(brain: Brain, client: httpx.AsyncClient) -> None:
    token = users.setup_token(brain)
    assert (await client.get("/setup?token=wrong")).status_code == 404
    page = await client.get(f"/setup?token={token}")
    assert page.status_code == 200
    assert "Create the first administrator" in page.text
    form = {
        "csrf_token": _field(page.text, "csrf_token"),
        "token": token,
        "email": "root@example.com",
        "password": "a long password",
        "password_again": "a long password",
    }
    mismatch = await client.post("/setup", data={**form, "password_again": "different pw!"})
    assert mismatch.status_code == 422
    assert "differ" in mismatch.text
    done = await client.post("/setup", data=form)
    assert done.status_code == 303
    assert done.headers["location"] == "/projects"
    projects = await client.get("/api/v1/projects")  # signed in by the setup itself
    assert [p["name"] for p in projects.json()] == ["default"]
    again = await client.get(f"/setup?token={token}")
    assert again.status_code == 404
    replay = await client.post("/setup", data={**form, "email": "second@example.com"})
    assert replay.status_code == 404


async def test_setup_token_is_stable_and_secret_derived(brain: Brain) -> None:
    assert users.setup_token(brain) == users.setup_token(brain)
    assert len(users.setup_token(brain)) >= 40
