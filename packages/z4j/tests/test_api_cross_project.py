"""Every project-scoped route answers 404 for another project's ids, and 401 without a session.

The probes change nothing when they pass (each is refused), so one database, one app and one
world of two projects serve the whole module; a probe that did change something fails itself.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime

import httpx
import pytest
from asgi_lifespan import LifespanManager
from fastapi import FastAPI
from platformkit.testing.databases import DatabaseFactory
from z4j.actions import alerts, invitations, schedules
from z4j.app import create_app
from z4j.settings import Settings
from z4j.store import bulk_retries as bulk_store
from z4j.store import commands as command_store

from .conftest import BASE_URL, Seed

NO_ID = uuid.UUID(int=1)  # a command or bulk retry id of mine: the project check comes first


@dataclass
class World:
    mine: uuid.UUID
    theirs: uuid.UUID
    my_agent: uuid.UUID
    their_agent: uuid.UUID
    my_task: uuid.UUID
    their_task: uuid.UUID
    their_user: uuid.UUID  # a member of theirs only
    their_invitation: uuid.UUID
    their_command: uuid.UUID
    their_bulk: uuid.UUID
    their_schedule: uuid.UUID
    their_rule: uuid.UUID

    def urls(self, path: str, project: uuid.UUID, *, theirs: bool = True) -> str:
        """``path`` with its placeholders filled: children of the other project when
        ``theirs``, else of mine (my own invitation and user ids are not needed)."""
        return path.format(
            p=project,
            a=self.their_agent if theirs else self.my_agent,
            t=self.their_task if theirs else self.my_task,
            u=self.their_user,
            i=self.their_invitation,
            c=self.their_command if theirs else NO_ID,
            b=self.their_bulk if theirs else NO_ID,
            s=self.their_schedule,
            r=self.their_rule if theirs else NO_ID,
        )


@pytest.fixture(scope="module")
def module_database(database_factory: DatabaseFactory, z4j_template: str) -> Iterator[str]:
    url = database_factory.create(z4j_template, stem="z4j")
    yield url
    database_factory.drop(url)


@pytest.fixture(scope="module")
async def module_app(
    module_database: str, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[FastAPI]:
    config = tmp_path_factory.mktemp("cross-project") / "config"
    app = create_app(Settings(database_url=module_database, config_dir=config, public_url=BASE_URL))
    async with LifespanManager(app):
        yield app


@pytest.fixture(scope="module")
def seed(module_app: FastAPI, module_database: str) -> Seed:
    return Seed(module_app.state.brain, module_app, module_database)


@pytest.fixture(scope="module")
async def client(module_app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=module_app)
    async with httpx.AsyncClient(transport=transport, base_url=BASE_URL) as http:
        yield http


@pytest.fixture(scope="module")
async def world(seed: Seed) -> World:
    ada = await seed.user("ada@example.com")
    bob = await seed.user("bob@example.com")
    mine, theirs = await seed.project(ada, "ada"), await seed.project(bob, "bob")
    my_agent = (await seed.agent(ada, mine)).agent["id"]
    their_agent = (await seed.agent(bob, theirs)).agent["id"]
    [my_task] = seed.tasks(mine, [{}])
    [their_task] = seed.tasks(theirs, [{}])
    sent = await invitations.invite(seed.ctx(bob), theirs, "carol@example.com", "viewer")
    async with seed.brain.project_tx(theirs) as conn:
        command = await command_store.create(
            conn,
            project_id=theirs,
            agent_id=their_agent,
            action="cancel_task",
            target={"task_id": str(their_task)},
            parameters={},
            timeout_seconds=60,
            issued_by=bob.id,
            task_id=their_task,
            now=datetime.now(UTC),
        )
        bulk = await bulk_store.create(conn, theirs, {}, [their_task], bob.id)
    schedule = await schedules.create_schedule(
        seed.ctx(bob), theirs,
        {"name": "theirs", "task": "a.b", "schedule_type": "interval", "expression": "1h"},
    )  # fmt: skip
    rule = await alerts.create_rule(
        seed.ctx(bob), theirs, {"name": "theirs", "kind": "queue_depth", "threshold": 1}
    )
    return World(
        mine,
        theirs,
        my_agent,
        their_agent,
        my_task,
        their_task,
        bob.id,
        sent.invitation["id"],
        command["id"],
        bulk["id"],
        schedule["id"],
        rule["id"],
    )


# (method, path, body); {p} project, {a} agent, {t} task, {c} command, {b} bulk retry,
# {s} schedule, {r} alert rule
PROJECT_ROUTES = [
    ("GET", "/api/v1/projects/{p}", None),
    ("GET", "/api/v1/projects/{p}/members", None),
    ("POST", "/api/v1/projects/{p}/members", {"email": "bob@example.com", "role": "viewer"}),
    ("PATCH", "/api/v1/projects/{p}/members/{u}", {"role": "viewer"}),
    ("DELETE", "/api/v1/projects/{p}/members/{u}", None),
    ("POST", "/api/v1/projects/{p}/owners", {"email": "ada@example.com"}),
    ("GET", "/api/v1/projects/{p}/invitations", None),
    ("POST", "/api/v1/projects/{p}/invitations", {"email": "eve@example.com", "role": "viewer"}),
    ("DELETE", "/api/v1/projects/{p}/invitations/{i}", None),
    ("GET", "/api/v1/projects/{p}/agents", None),
    ("POST", "/api/v1/projects/{p}/agents", {"name": "sneaky"}),
    ("GET", "/api/v1/projects/{p}/agents/{a}", None),
    ("DELETE", "/api/v1/projects/{p}/agents/{a}", None),
    ("GET", "/api/v1/projects/{p}/tasks", None),
    ("GET", "/api/v1/projects/{p}/tasks/{t}", None),
    ("GET", "/api/v1/projects/{p}/events/stream", None),
    ("PUT", "/api/v1/projects/{p}/require-mfa", {"required": False}),
    ("GET", "/api/v1/projects/{p}/retention", None),
    (
        "PUT",
        "/api/v1/projects/{p}/retention",
        {"task_retention_days": 1, "event_retention_days": 1},
    ),
    ("GET", "/api/v1/projects/{p}/audit", None),
    ("GET", "/api/v1/projects/{p}/audit/export", None),
    ("POST", "/api/v1/projects/{p}/tasks/{t}/retry", {}),
    ("POST", "/api/v1/projects/{p}/tasks/{t}/cancel", {}),
    ("POST", "/api/v1/projects/{p}/tasks/bulk-retry", {"max": 1}),
    ("GET", "/api/v1/projects/{p}/bulk-retries/{b}", None),
    ("POST", "/api/v1/projects/{p}/queues/purge", {"queue": "q", "confirm": "q"}),
    ("POST", "/api/v1/projects/{p}/rate-limits", {"task_name": "a", "rate": "1/m"}),
    ("POST", "/api/v1/projects/{p}/workers/pool", {"worker": "w", "delta": 1}),
    ("POST", "/api/v1/projects/{p}/workers/restart", {"worker": "w"}),
    ("GET", "/api/v1/projects/{p}/queues", None),
    ("GET", "/api/v1/projects/{p}/workers", None),
    ("GET", "/api/v1/projects/{p}/commands", None),
    ("GET", "/api/v1/projects/{p}/commands/{c}", None),
    ("GET", "/api/v1/projects/{p}/schedules", None),
    (
        "POST",
        "/api/v1/projects/{p}/schedules",
        {"name": "n", "task": "a.b", "schedule_type": "interval", "expression": "1h"},
    ),
    ("GET", "/api/v1/projects/{p}/schedules/{s}", None),
    ("PATCH", "/api/v1/projects/{p}/schedules/{s}", {"enabled": False}),
    ("POST", "/api/v1/projects/{p}/schedules/{s}/enable", None),
    ("POST", "/api/v1/projects/{p}/schedules/{s}/disable", None),
    ("POST", "/api/v1/projects/{p}/schedules/{s}/run", None),
    ("DELETE", "/api/v1/projects/{p}/schedules/{s}", None),
    ("GET", "/projects/{p}/schedules", None),
    ("GET", "/projects/{p}/schedules/{s}", None),
    ("GET", "/api/v1/projects/{p}/trends", None),
    ("GET", "/api/v1/projects/{p}/alerts", None),
    (
        "POST",
        "/api/v1/projects/{p}/alert-rules",
        {"name": "x", "kind": "queue_depth", "threshold": 1},
    ),
    ("PATCH", "/api/v1/projects/{p}/alert-rules/{r}", {"enabled": False}),
    ("DELETE", "/api/v1/projects/{p}/alert-rules/{r}", None),
    ("GET", "/projects/{p}", None),
    ("GET", "/projects/{p}/trends", None),
    ("GET", "/projects/{p}/alerts", None),
    ("GET", "/projects/{p}/tasks", None),
    ("GET", "/projects/{p}/tasks/{t}", None),
    ("GET", "/projects/{p}/agents", None),
    ("GET", "/projects/{p}/members", None),
    ("GET", "/projects/{p}/audit", None),
    ("GET", "/projects/{p}/operate", None),
    ("GET", "/projects/{p}/queues", None),
    ("GET", "/projects/{p}/workers", None),
    ("GET", "/projects/{p}/bulk-retries/{b}", None),
]


def test_every_project_route_is_listed() -> None:
    from z4j.app import create_app
    from z4j.console import (
        agents,
        alerts,
        audit,
        commands,
        members,
        projects,
        schedules,
        tasks,
        trends,
    )

    paths = create_app().openapi()["paths"]
    scoped = {
        (m.upper(), path) for path, ops in paths.items() for m in ops if "{project_id}" in path
    }
    scoped |= {
        (m, route.path)
        for module in (agents, audit, members, projects, tasks, commands, schedules, alerts, trends)
        for route in module.router.routes
        for m in getattr(route, "methods", ())
        if "{project_id}" in route.path and m != "HEAD"
    }
    listed = {
        (
            m,
            p.replace("{p}", "{project_id}")
            .replace("{a}", "{agent_id}")
            .replace("{t}", "{task_id}")
            .replace("{u}", "{user_id}")
            .replace("{i}", "{invitation_id}")
            .replace("{c}", "{command_id}")
            .replace("{b}", "{bulk_id}")
            .replace("{s}", "{schedule_id}")
            .replace("{r}", "{rule_id}"),
        )
        for m, p, _ in PROJECT_ROUTES
    }
    form_posts = {
        ("POST", "/projects/{project_id}/agents"),
        ("POST", "/projects/{project_id}/members"),
        ("POST", "/projects/{project_id}/invitations"),
        ("POST", "/projects/{project_id}/invitations/{invitation_id}/revoke"),
        ("POST", "/projects/{project_id}/members/{user_id}/role"),
        ("POST", "/projects/{project_id}/members/{user_id}/remove"),
        ("POST", "/projects/{project_id}/agents/{agent_id}/delete"),
        ("POST", "/projects/{project_id}/require-mfa"),
        ("POST", "/projects/{project_id}/tasks/{task_id}/retry"),
        ("POST", "/projects/{project_id}/tasks/{task_id}/cancel"),
        ("POST", "/projects/{project_id}/tasks/bulk-retry"),
        ("POST", "/projects/{project_id}/operate/purge"),
        ("POST", "/projects/{project_id}/operate/rate-limit"),
        ("POST", "/projects/{project_id}/operate/pool"),
        ("POST", "/projects/{project_id}/operate/restart"),
        ("POST", "/projects/{project_id}/retention"),
        ("POST", "/projects/{project_id}/schedules"),
        ("POST", "/projects/{project_id}/schedules/{schedule_id}"),
        *(
            ("POST", f"/projects/{{project_id}}/schedules/{{schedule_id}}/{verb}")
            for verb in ("enable", "disable", "run", "delete")
        ),
        ("POST", "/projects/{project_id}/alerts"),
        ("POST", "/projects/{project_id}/alerts/{rule_id}/enabled"),
        ("POST", "/projects/{project_id}/alerts/{rule_id}/delete"),
    }
    assert scoped - form_posts == listed


@pytest.mark.parametrize(("method", "path", "body"), PROJECT_ROUTES)
async def test_another_projects_ids_are_not_found(
    seed: Seed, world: World, method: str, path: str, body: dict[str, str] | None
) -> None:
    url = world.urls(path, world.theirs)
    async with seed.signed_in("ada@example.com") as http:
        response = await http.request(method, url, json=body)
    assert response.status_code == 404, response.text
    if url.startswith("/api/"):
        assert response.json()["code"] == "project.not_found"


CHILDREN = ("{a}", "{t}", "{u}", "{i}", "{s}", "{r}")


@pytest.mark.parametrize(
    ("method", "path", "body"), [r for r in PROJECT_ROUTES if any(c in r[1] for c in CHILDREN)]
)
async def test_another_projects_children_are_not_found_in_mine(
    seed: Seed, world: World, method: str, path: str, body: dict[str, str] | None
) -> None:
    url = world.urls(path, world.mine)
    async with seed.signed_in("ada@example.com") as http:
        response = await http.request(method, url, json=body)
    assert response.status_code == 404, response.text
    if url.startswith("/api/"):
        codes = ("agent.not_found", "task.not_found", "member.not_found", "invitation.not_found",
                 "schedule.not_found", "alert_rule.not_found")  # fmt: skip
        assert response.json()["code"] in codes


@pytest.mark.parametrize(("method", "path", "body"), PROJECT_ROUTES)
async def test_every_route_needs_a_session(
    client: httpx.AsyncClient, world: World, method: str, path: str, body: dict[str, str] | None
) -> None:
    url = world.urls(path, world.mine, theirs=False)
    response = await client.request(method, url, json=body)
    if url.startswith("/api/"):
        assert response.status_code == 401
        assert response.json()["code"] == "auth.required"
    else:
        assert response.status_code == 303
        assert response.headers["location"].startswith("/login?next=/projects/")


async def test_lists_outside_a_project_show_nothing_of_another(seed: Seed, world: World) -> None:
    """Every GET of the OpenAPI document that names no project (the project list, one's own
    account) shows none of the other project's ids; the agent channel's routes are the agent's,
    not a user's (their own tests)."""
    theirs = {world.theirs, world.their_agent, world.their_task, world.their_invitation}
    async with seed.signed_in("ada@example.com") as http:
        paths = (await http.get("/api/v1/openapi.json")).json()["paths"]
        listed = [
            path
            for path, item in paths.items()
            if "get" in item and "{" not in path and not path.startswith("/api/v1/agent/")
        ]
        assert "/api/v1/projects" in listed
        for path in listed:
            answer = await http.get(path)
            shown = [str(i) for i in theirs if str(i) in answer.text]
            assert shown == [], (path, shown)


async def test_every_get_of_the_document_hides_another_projects_ids(
    seed: Seed, world: World
) -> None:
    """Read from the OpenAPI document, so a new route is probed as soon as it exists: every GET
    naming the other project, or one of its children under my project, answers 404."""
    theirs = {
        "project_id": world.theirs,
        "agent_id": world.their_agent,
        "task_id": world.their_task,
        "user_id": world.their_user,
        "invitation_id": world.their_invitation,
        "command_id": world.their_command,
        "bulk_id": world.their_bulk,
        "schedule_id": world.their_schedule,
        "rule_id": world.their_rule,
    }
    async with seed.signed_in("ada@example.com") as http:
        paths = (await http.get("/api/v1/openapi.json")).json()["paths"]
        probed = 0
        for path, item in sorted(paths.items()):
            names = [
                p["name"] for p in item.get("get", {}).get("parameters", []) if p["in"] == "path"
            ]
            if not names:
                continue  # lists: test_lists_outside_a_project_show_nothing_of_another
            assert set(names) <= set(theirs), f"{path}: the probe has no id for {names}"
            urls = [path.format(**{n: theirs[n] for n in names})]
            if len(names) > 1:  # the other project's child, asked for under my project
                urls.append(
                    path.format(**{**{n: theirs[n] for n in names}, "project_id": world.mine})
                )
            for url in urls:
                answer = await http.get(url)
                probed += 1
                assert answer.status_code == 404, (url, answer.status_code)
    assert probed >= 5
