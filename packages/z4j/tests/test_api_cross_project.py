"""Every project-scoped route answers 404 for another project's ids, and 401 without a session."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

import httpx
import pytest
from z4j.actions import invitations

from .conftest import Seed


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

    def urls(self, path: str, project: uuid.UUID, *, theirs: bool = True) -> str:
        """``path`` with its placeholders filled: children of the other project when
        ``theirs``, else of mine (my own invitation and user ids are not needed)."""
        return path.format(
            p=project,
            a=self.their_agent if theirs else self.my_agent,
            t=self.their_task if theirs else self.my_task,
            u=self.their_user,
            i=self.their_invitation,
        )


@pytest.fixture
async def world(seed: Seed) -> World:
    ada = await seed.user("ada@example.com")
    bob = await seed.user("bob@example.com")
    mine, theirs = await seed.project(ada, "ada"), await seed.project(bob, "bob")
    my_agent = (await seed.agent(ada, mine)).agent["id"]
    their_agent = (await seed.agent(bob, theirs)).agent["id"]
    [my_task] = seed.tasks(mine, [{}])
    [their_task] = seed.tasks(theirs, [{}])
    sent = await invitations.invite(seed.ctx(bob), theirs, "carol@example.com", "viewer")
    return World(
        mine, theirs, my_agent, their_agent, my_task, their_task, bob.id, sent.invitation["id"]
    )


# (method, path, body); {p} project, {a} agent, {t} task
PROJECT_ROUTES = [
    ("GET", "/api/v1/projects/{p}", None),
    ("GET", "/api/v1/projects/{p}/members", None),
    ("POST", "/api/v1/projects/{p}/members", {"email": "bob@example.com", "role": "viewer"}),
    ("PATCH", "/api/v1/projects/{p}/members/{u}", {"role": "viewer"}),
    ("DELETE", "/api/v1/projects/{p}/members/{u}", None),
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
    ("GET", "/projects/{p}", None),
    ("GET", "/projects/{p}/tasks", None),
    ("GET", "/projects/{p}/tasks/{t}", None),
    ("GET", "/projects/{p}/agents", None),
    ("GET", "/projects/{p}/members", None),
]


def test_every_project_route_is_listed() -> None:
    from z4j.app import create_app
    from z4j.console import agents, members, projects, tasks

    paths = create_app().openapi()["paths"]
    scoped = {
        (m.upper(), path) for path, ops in paths.items() for m in ops if "{project_id}" in path
    }
    scoped |= {
        (m, route.path)
        for module in (agents, members, projects, tasks)
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
            .replace("{i}", "{invitation_id}"),
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


CHILDREN = ("{a}", "{t}", "{u}", "{i}")


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
        codes = ("agent.not_found", "task.not_found", "member.not_found", "invitation.not_found")
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
