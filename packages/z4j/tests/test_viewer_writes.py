"""A viewer reaches no write: every POST, PUT, PATCH and DELETE route of the brain (found by
walking the app, so a new route is covered without being listed) answers a viewer 403 with a
valid body, and nothing changes. Exempt are only the agent channel (agent tokens) and the
caller's own account (sign-in, password, API keys, two-factor, accepting an invitation)."""

from __future__ import annotations

import enum
import re
import typing
import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
from fastapi import FastAPI
from pydantic import BaseModel

from .conftest import Seed
from .hostile import form_token

UNSAFE = {"POST", "PUT", "PATCH", "DELETE"}
AGENT = ("/api/v1/agent/",)
OWN_ACCOUNT = (
    "/api/v1/auth/",
    "/api/v1/api-keys",
    "/api/v1/invitations/accept",
    "/login",
    "/logout",
    "/setup",
    "/forgot-password",
    "/reset-password/",
    "/account/",
    "/invite/",
)
TABLES = (
    "projects",
    "users",
    "memberships",
    "invitations",
    "agents",
    "api_keys",
    "user_mfa",
    "alert_rules",
)


def write_routes(app: FastAPI) -> Iterator[tuple[str, str, Any]]:
    """(method, path template, body model or None) of every unsafe route."""

    def walk(routes: Any) -> Iterator[tuple[set[str], str, Any]]:
        for route in routes:
            if hasattr(route, "effective_route_contexts"):  # an included router
                for ctx in route.effective_route_contexts():
                    yield ctx.methods or set(), ctx.path, ctx.body_field
            elif hasattr(route, "methods"):
                yield route.methods or set(), route.path, getattr(route, "body_field", None)

    for methods, path, body in walk(app.routes):
        for method in sorted(methods & UNSAFE):
            model = body.field_info.annotation if body is not None else None
            yield method, path, model


def sample(annotation: Any, project: uuid.UUID) -> Any:
    if typing.get_origin(annotation) in (typing.Union, __import__("types").UnionType):
        annotation = next(a for a in typing.get_args(annotation) if a is not type(None))
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return list(annotation)[-1].value  # the least role
    if annotation is bool:
        return True
    if annotation is int:
        return 1
    if annotation is uuid.UUID:
        return str(project)
    if typing.get_origin(annotation) is list:
        return []
    return "probe@example.com"


def body_for(model: Any, project: uuid.UUID) -> dict[str, Any] | None:
    if model is None or not (isinstance(model, type) and issubclass(model, BaseModel)):
        return None
    return {
        name: sample(field.annotation, project)
        for name, field in model.model_fields.items()
        if field.is_required()
    }


def counts(url: str) -> dict[str, int]:
    with psycopg.connect(url) as conn:
        out = {}
        for table in TABLES:
            row = conn.execute(f"SELECT count(*) FROM {table}").fetchone()
            out[table] = int(row[0]) if row else 0
        row = conn.execute("SELECT count(*) FROM audit_log WHERE action NOT LIKE 'auth.%'")
        found = row.fetchone()
        out["audit_log"] = int(found[0]) if found else 0
        return out


async def test_a_viewer_reaches_no_write(seed: Seed, z4j_database: str) -> None:
    owner = await seed.user("own@example.com")
    project = await seed.project(owner)
    viewer = await seed.user("view@example.com")
    await seed.member(project, viewer, "viewer")
    agent = await seed.agent(owner, project)
    async with seed.signed_in("own@example.com") as http:
        invited = await http.post(
            f"/api/v1/projects/{project}/invitations",
            json={"email": "x@example.com", "role": "viewer"},
        )
        key = await http.post(
            "/api/v1/api-keys", json={"project_id": str(project), "name": "k", "role": "viewer"}
        )
    ids = {
        "project_id": project,
        "user_id": owner.id,
        "agent_id": agent.agent["id"],
        "invitation_id": invited.json()["id"],
        "key_id": key.json()["key"]["id"],
    }
    before = counts(z4j_database)
    checked, exempt = [], []
    async with seed.signed_in("view@example.com") as http:
        csrf = form_token((await http.get("/account")).text)
        form = {"csrf_token": csrf, "email": "probe@example.com", "role": "viewer",
                "name": "probe", "required": "1", "project_id": str(project),
                "code": "123456"}  # fmt: skip
        for method, template, model in write_routes(seed.app):
            if template.startswith(AGENT) or template.startswith(OWN_ACCOUNT):
                exempt.append(template)
                continue
            path = re.sub(r"\{(\w+)\}", lambda m: str(ids.get(m.group(1), uuid.uuid4())), template)
            if template.startswith("/api/"):
                body = body_for(model, project)
                answer = await http.request(method, path, json=body)
            else:
                answer = await http.request(method, path, data=form)
            assert answer.status_code == 403, (method, template, answer.status_code, answer.text)
            checked.append(f"{method} {template}")
    assert counts(z4j_database) == before
    # the walk found the routes it must (it is not vacuous)
    for expected in ("PATCH /api/v1/projects/{project_id}/members/{user_id}",
                     "POST /projects/{project_id}/agents",
                     "PUT /api/v1/projects/{project_id}/require-mfa",
                     "POST /api/v1/users/{user_id}/disable"):  # fmt: skip
        assert expected in checked
    assert len(checked) >= 20
