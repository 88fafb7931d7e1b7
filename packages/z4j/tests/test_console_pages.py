"""Dashboard pages render from the same reads as the API, and work without script."""

from __future__ import annotations

import re
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import psycopg
import pytest
from z4j.actions import members
from z4j.actions.context import User
from z4j.brain import Brain
from z4j.console.render import duration, reltime

from .conftest import PASSWORD, Seed
from .test_api_members import outbox_tokens


def token(html: str) -> str:
    found = re.search(r'name="csrf_token" value="([^"]+)"', html)
    assert found is not None
    return found.group(1)


async def test_signing_in_through_the_form_returns_to_the_page_asked_for(
    seed: Seed, client: httpx.AsyncClient
) -> None:
    owner = await seed.user("own@example.com")
    project = await seed.project(owner, "shop")
    asked = await client.get(f"/projects/{project}/tasks?state=failed")
    assert asked.status_code == 303
    login_url = asked.headers["location"]
    assert login_url == f"/login?next=/projects/{project}/tasks%3Fstate%3Dfailed"
    page = await client.get(login_url)
    assert 'name="next" value="/projects/' in page.text
    wrong = await client.post(
        "/login",
        data={
            "email": "own@example.com",
            "password": "nope",
            "csrf_token": token(page.text),
            "next": f"/projects/{project}/tasks",
        },
    )
    assert wrong.status_code == 401
    assert "Invalid email or password" in wrong.text
    done = await client.post(
        "/login",
        data={
            "email": "own@example.com",
            "password": PASSWORD,
            "csrf_token": token(page.text),
            "next": f"/projects/{project}/tasks?state=failed",
        },
    )
    assert done.status_code == 303
    assert done.headers["location"] == f"/projects/{project}/tasks?state=failed"
    tasks = await client.get(done.headers["location"])
    assert tasks.status_code == 200
    assert "No tasks match these filters" in tasks.text
    out = await client.post("/logout", data={"csrf_token": token(tasks.text)})
    assert out.status_code == 303
    assert out.headers["location"] == "/login"
    assert (await client.get("/projects")).status_code == 303


async def test_overview_tasks_and_detail(seed: Seed) -> None:
    owner = await seed.user("own@example.com")
    project = await seed.project(owner, "shop")
    agent = await seed.agent(owner, project, "web-workers")
    now = datetime.now(UTC)
    ids = seed.tasks(
        project,
        [
            {
                "name": "shop.checkout",
                "state": "failed",
                "agent_id": agent.agent["id"],
                "created_at": now - timedelta(minutes=5),
                "args": ["<script>alert(1)</script>"],
                "error": {
                    "exc_type": "KeyError",
                    "exc_msg": "'sku'",
                    "traceback_redacted": "Traceback (most recent call last):\nKeyError: 'sku'",
                },
                "runtime_ms": 1520.0,
                "worker": "celery@web-1",
            },
            *[
                {
                    "name": f"shop.mail.n{i}",
                    "state": "succeeded",
                    "queue": "mail",
                    "created_at": now - timedelta(minutes=10, seconds=i),
                }
                for i in range(60)
            ],
        ],
    )
    async with seed.signed_in("own@example.com") as http:
        overview = await http.get(f"/projects/{project}")
        assert overview.status_code == 200
        assert re.search(r'stat-n">60<.*?succeeded', overview.text, re.S)
        assert "0 of 1 online" in overview.text
        assert "web-workers" in overview.text

        listing = await http.get(f"/projects/{project}/tasks")
        assert "shop.checkout" in listing.text
        assert "Older →" in listing.text
        assert 'rel="next"' in listing.text
        assert "1.52 s" in listing.text
        assert 'data-stream="/api/v1/projects/' in listing.text

        failed = await http.get(f"/projects/{project}/tasks", params={"state": "failed"})
        assert "shop.checkout" in failed.text
        assert "shop.mail" not in failed.text
        assert 'value="failed" checked' in failed.text

        older = re.search(r'href="([^"]+)" rel="next"', listing.text)
        assert older is not None
        second = await http.get(older.group(1).replace("&amp;", "&"))
        assert second.status_code == 200
        assert 'rel="prev"' in second.text

        fragment = await http.get(f"/projects/{project}/tasks", params={"fragment": "1"})
        assert fragment.headers["x-z4j-fragment"] == "1"
        assert "<html" not in fragment.text
        assert "shop.checkout" in fragment.text

        detail = await http.get(f"/projects/{project}/tasks/{ids[0]}")
        assert detail.status_code == 200
        assert "KeyError" in detail.text
        assert "Traceback (most recent call last)" in detail.text
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in detail.text  # escaped, never markup
        assert "<script>alert" not in detail.text
        assert "celery@web-1" in detail.text
        assert "web-workers" in detail.text


async def test_bad_filters_show_an_error_page(seed: Seed) -> None:
    owner = await seed.user("own@example.com")
    project = await seed.project(owner)
    async with seed.signed_in("own@example.com") as http:
        response = await http.get(f"/projects/{project}/tasks", params={"since": "soon"})
        assert response.status_code == 422
        assert "ISO 8601" in response.text
        missing = await http.get(f"/projects/{uuid.uuid4()}/tasks")
        assert missing.status_code == 404
        assert "Project not found" in missing.text
        unknown = await http.get("/no/such/page")
        assert unknown.status_code == 404
        assert "Page not found" in unknown.text


async def test_agent_form_shows_the_secrets_once(seed: Seed, z4j_database: str) -> None:
    owner = await seed.user("own@example.com")
    project = await seed.project(owner)
    async with seed.signed_in("own@example.com") as http:
        page = await http.get(f"/projects/{project}/agents")
        assert "No agents configured" in page.text
        assert "Create agent" in page.text
        made = await http.post(
            f"/projects/{project}/agents", data={"name": "billing", "csrf_token": token(page.text)}
        )
        assert made.status_code == 201
        assert made.headers["cache-control"] == "no-store"
        minted = re.search(r'id="agent-token" class="mono">(z4ja_[^<]+)<', made.text)
        assert minted is not None
        assert "Z4J_HMAC_SECRET=" in made.text
        assert "Z4J_BRAIN_URL=http://testserver" in made.text
        assert "from z4j_agent.celery import install" in made.text
        again = await http.get(f"/projects/{project}/agents")
        assert minted.group(1) not in again.text
        assert "billing" in again.text
        taken = await http.post(
            f"/projects/{project}/agents", data={"name": "billing", "csrf_token": token(page.text)}
        )
        assert taken.status_code == 409
        assert "An agent with this name exists" in taken.text
        with psycopg.connect(z4j_database) as conn:
            row = conn.execute("SELECT id FROM agents").fetchone()
        assert row is not None
        gone = await http.post(
            f"/projects/{project}/agents/{row[0]}/delete", data={"csrf_token": token(page.text)}
        )
        assert gone.status_code == 303
        assert "No agents configured" in (await http.get(gone.headers["location"])).text


async def test_viewers_get_no_management_forms(seed: Seed) -> None:
    owner = await seed.user("own@example.com")
    project = await seed.project(owner)
    await seed.member(project, await seed.user("view@example.com"), "viewer")
    async with seed.signed_in("view@example.com") as http:
        agents = await http.get(f"/projects/{project}/agents")
        members = await http.get(f"/projects/{project}/members")
        refused = await http.post(
            f"/projects/{project}/agents", data={"name": "x", "csrf_token": token(agents.text)}
        )
    assert "Create agent" not in agents.text
    assert "Add a member" not in members.text
    assert "own@example.com" in members.text
    assert refused.status_code == 403


async def test_members_and_projects_forms(seed: Seed) -> None:
    await seed.user("root@example.com", is_admin=True)
    await seed.user("ada@example.com")
    async with seed.signed_in("root@example.com") as http:
        listing = await http.get("/projects")
        assert "New project" in listing.text
        made = await http.post("/projects", data={"name": "ops", "csrf_token": token(listing.text)})
        project_url = made.headers["location"]
        dup = await http.post("/projects", data={"name": "ops", "csrf_token": token(listing.text)})
        assert dup.status_code == 409
        assert "A project with this name exists" in dup.text
        added = await http.post(
            f"{project_url}/members",
            data={
                "email": "ada@example.com",
                "role": "operator",
                "csrf_token": token(listing.text),
            },
        )
        assert added.status_code == 200
        assert "ada@example.com is now operator." in added.text
        listed = await http.get(f"{project_url}/members")
        assert "ada@example.com" in listed.text
        assert "operator" in listed.text
        nobody = await http.post(
            f"{project_url}/members",
            data={"email": "x@example.com", "role": "viewer", "csrf_token": token(listing.text)},
        )
        assert nobody.status_code == 404
        assert "No user has this email" in nobody.text


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (2, "just now"),
        (42, "42 s ago"),
        (150, "2 min ago"),
        (7300, "2 h ago"),
        (200000, "2 d ago"),
        (-120, "in 2 min"),
    ],
)
def test_relative_times(seconds: int, text: str) -> None:
    now = datetime(2026, 1, 10, tzinfo=UTC)
    assert reltime(now - timedelta(seconds=seconds), now) == text


def test_durations() -> None:
    assert [duration(v) for v in (None, 12.4, 1520.0, 125_000.0)] == [
        "",
        "12 ms",
        "1.52 s",
        "2 min 5 s",
    ]


async def test_inviting_changing_and_removing_through_the_members_page(
    seed: Seed, brain: Brain, client: httpx.AsyncClient
) -> None:
    owner = await seed.user("own@example.com")
    project = await seed.project(owner, "shop")
    await seed.member(project, await seed.user("op@example.com"), "operator")
    page_url = f"/projects/{project}/members"
    async with seed.signed_in("own@example.com") as http:
        page = await http.get(page_url)
        assert "Invite by email" in page.text
        assert "Add a member" not in page.text  # owners invite; direct adds are for brain admins
        sent = await http.post(
            f"/projects/{project}/invitations",
            data={"email": "new@example.com", "role": "viewer", "csrf_token": token(page.text)},
        )
        assert sent.status_code == 200
        assert "Invitation sent to new@example.com" in sent.text
        assert "Pending invitations" in sent.text
        op_id = next(
            m["user_id"]
            for m in await members_of(seed, owner, project)
            if m["email"] == "op@example.com"
        )
        changed = await http.post(
            f"/projects/{project}/members/{op_id}/role",
            data={"role": "admin", "csrf_token": token(page.text)},
        )
        assert "op@example.com is now admin." in changed.text
        last = await http.post(
            f"/projects/{project}/members/{owner.id}/remove", data={"csrf_token": token(page.text)}
        )
        assert last.status_code == 409
        assert "last owner" in last.text
    [invite_token] = outbox_tokens(brain.settings)
    invite_page = await client.get(f"/invite/{invite_token}")
    assert "Join shop" in invite_page.text
    assert "Create my account and join" in invite_page.text
    joined = await client.post(
        f"/invite/{invite_token}",
        data={
            "password": "a fresh and long passphrase",
            "password_again": "a fresh and long passphrase",
            "csrf_token": token(invite_page.text),
        },
    )
    assert joined.status_code == 303
    assert joined.headers["location"] == f"/projects/{project}"
    assert "new@example.com" in (await client.get(page_url)).text
    used = await client.get(f"/invite/{invite_token}")
    assert used.status_code == 404


async def members_of(seed: Seed, actor: User, project: uuid.UUID) -> list[dict[str, Any]]:
    return await members.list_members(seed.ctx(actor), project)
