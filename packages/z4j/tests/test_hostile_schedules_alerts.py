"""Hostile input on the schedules and alerts routes and their dashboard forms, one server for
the module: NUL and a lone surrogate in each text field and in the path, 2**70 and -2**70,
JSON nested 100,000 deep, a 30 MiB body, wrong types, empty and over-long text. Each is a 4xx
(413 or 422 problem+json on the API), stores nothing, and the server keeps serving."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from asgi_lifespan import LifespanManager
from fastapi import FastAPI
from platformkit.testing.databases import DatabaseFactory
from platformkit.testing.hostile import DEEP, HUGE, Case, assert_answered, form_cases, json_cases
from z4j.app import create_app
from z4j.settings import Settings

from .conftest import BASE_URL, Seed
from .hostile import form_token

SCHEDULE = {
    "name": "nightly-UNIQUE",
    "task": "app.tasks.report",
    "schedule_type": "cron",
    "expression": "0 3 * * *",
    "args": [1],
    "kwargs": {"a": "b"},
    "queue": "reports",
    "timezone": "UTC",
}
RULE = {
    "name": "failures-UNIQUE",
    "kind": "failure_rate",
    "threshold": 10,
    "window_seconds": 300,
    "min_tasks": 5,
    "task_name": "app.tasks.report",
    "queue": "reports",
    "webhook_url": "https://hooks.example.com/x",
    "emails": ["ops@example.com"],
}


def dashboard_form_cases(fields: dict[str, str]) -> list[Case]:
    """The shared hostile variants of a form body, and hostile JSON in each field: refused in
    the fields that hold JSON (args, kwargs), answered without a 5xx in the others."""
    cases = form_cases(fields)
    for name in fields:

        def put(v: str, name: str = name) -> bytes:
            return str(httpx.QueryParams({**fields, name: v})).encode()

        cases.append((f"json deep in {name}", put("[" * DEEP + "]" * DEEP), name in JSON_FIELDS))
        if name in JSON_FIELDS:
            cases += [
                (f"json nul in {name}", put('["a\\u0000"]'), True),
                (f"json surrogate in {name}", put('{"a": "\\ud800"}'), True),
                (f"json 2**70 in {name}", put(f"[{2**70}]"), True),
            ]
    return cases


JSON_FIELDS = ("args", "kwargs")


@pytest.fixture(scope="module")
async def world(
    database_factory: DatabaseFactory, z4j_template: str, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[tuple[Seed, httpx.AsyncClient, dict[str, str]]]:
    url = database_factory.create(z4j_template, stem="z4j")
    settings = Settings(
        database_url=url,
        config_dir=Path(tmp_path_factory.mktemp("hostile-sa")),
        public_url=BASE_URL,
    )  # type: ignore[arg-type]
    app: FastAPI = create_app(settings)
    try:
        async with LifespanManager(app):
            seed = Seed(app.state.brain, app, url)
            admin = await seed.user("root@example.com", is_admin=True)
            project = await seed.project(admin)
            async with seed.signed_in("root@example.com") as http:
                base = f"/api/v1/projects/{project}"
                made = await http.post(f"{base}/schedules", json=SCHEDULE)
                assert made.status_code == 201, made.text
                rule = await http.post(f"{base}/alert-rules", json=RULE)
                assert rule.status_code == 201, rule.text
                csrf = form_token((await http.get("/account")).text)
                ids = {
                    "project": str(project),
                    "schedule": made.json()["id"],
                    "rule": rule.json()["id"],
                    "csrf": csrf,
                }
                yield seed, http, ids
    finally:
        if url in _CONNECTIONS:
            _CONNECTIONS.pop(url).close()
        database_factory.drop(url)


_CONNECTIONS: dict[str, psycopg.Connection[Any]] = {}


def snapshot(url: str) -> tuple[Any, ...]:
    """The stored schedules, rules and audit count (one connection for the module)."""
    conn = _CONNECTIONS.get(url) or _CONNECTIONS.setdefault(
        url, psycopg.connect(url, autocommit=True)
    )
    return tuple(
        conn.execute(sql).fetchall()
        for sql in (
            "SELECT id, name, task, expression, args, kwargs, metadata, enabled"
            " FROM schedules ORDER BY id",
            "SELECT id, name, threshold, window_seconds, task_name, webhook_url, emails,"
            " enabled FROM alert_rules ORDER BY id",
            "SELECT count(*) FROM audit_log WHERE action NOT LIKE 'auth.%'",
        )
    )


API = [
    ("POST", "/api/v1/projects/{project}/schedules", SCHEDULE),
    ("PATCH", "/api/v1/projects/{project}/schedules/{schedule}", SCHEDULE),
    ("POST", "/api/v1/projects/{project}/alert-rules", RULE),
    ("PATCH", "/api/v1/projects/{project}/alert-rules/{rule}", RULE),
]
API_CASES = [(m, p, *case) for m, p, f in API for case in json_cases(f)]


async def refused(
    world: tuple[Seed, httpx.AsyncClient, dict[str, str]],
    method: str,
    path: str,
    content: bytes,
    ctype: str,
) -> httpx.Response:
    seed, http, ids = world
    before = snapshot(seed.admin_url)
    # a name of its own, so that a create the variant leaves valid is not a name conflict
    content = content.replace(b"UNIQUE", uuid.uuid4().hex.encode())
    answer = await http.request(
        method, path.format(**ids), content=content, headers={"content-type": ctype}
    )
    if answer.status_code >= 400:
        assert snapshot(seed.admin_url) == before, "a refused request stored something"
    alive = await http.get(f"/api/v1/projects/{ids['project']}/schedules")
    assert alive.status_code == 200
    return answer


@pytest.mark.parametrize(
    ("method", "path", "label", "body", "must"),
    API_CASES,
    ids=[f"{c[0]} {c[1]} {c[2]}" for c in API_CASES],
)
async def test_api_refuses(
    world: tuple[Seed, httpx.AsyncClient, dict[str, str]],
    method: str,
    path: str,
    label: str,
    body: bytes,
    must: bool,
) -> None:
    answer = await refused(world, method, path, body, "application/json")
    assert answer.status_code < 500, (label, answer.status_code, answer.text[:300])
    if must:
        assert answer.status_code == 422, (label, answer.status_code, answer.text[:300])
        assert answer.json()["errors"][0]["field"], answer.text[:300]
    if answer.status_code >= 400:
        assert answer.headers["content-type"].startswith("application/problem+json")


@pytest.mark.parametrize(("method", "path"), [(m, p) for m, p, _ in API])
async def test_api_refuses_a_huge_body(
    world: tuple[Seed, httpx.AsyncClient, dict[str, str]], method: str, path: str
) -> None:
    body = b'{"name": "' + b"x" * HUGE + b'"}'
    answer = await refused(world, method, path, body, "application/json")
    assert answer.status_code == 413
    assert answer.headers["content-type"].startswith("application/problem+json")


PATHS = [
    ("GET", "/api/v1/projects/{project}/schedules/{bad}"),
    ("PATCH", "/api/v1/projects/{project}/schedules/{bad}"),
    ("POST", "/api/v1/projects/{project}/schedules/{bad}/run"),
    ("DELETE", "/api/v1/projects/{project}/schedules/{bad}"),
    ("PATCH", "/api/v1/projects/{project}/alert-rules/{bad}"),
    ("DELETE", "/api/v1/projects/{project}/alert-rules/{bad}"),
    ("GET", "/api/v1/projects/{bad}/alerts"),
    ("POST", "/projects/{project}/schedules/{bad}"),
    ("POST", "/projects/{project}/alerts/{bad}/enabled"),
]


@pytest.mark.parametrize("bad", ["a%00b", "%ED%A0%80", str(2**70), "", "x" * 5000])
@pytest.mark.parametrize(("method", "path"), PATHS, ids=[f"{m} {p}" for m, p in PATHS])
async def test_path_parameters(
    world: tuple[Seed, httpx.AsyncClient, dict[str, str]], method: str, path: str, bad: str
) -> None:
    ids = world[2]
    answer = await refused(world, method, path.format(**ids, bad=bad), b"{}", "application/json")
    # an empty segment is a redirect to the path without it, or no route
    assert answer.status_code in (307, 404, 405, 422), (answer.status_code, answer.text[:300])


FORMS = [
    (
        "/projects/{project}/schedules",
        {
            "name": "n2-UNIQUE",
            "task": "app.t",
            "schedule_type": "interval",
            "expression": "5m",
            "args": "[]",
            "kwargs": "{}",
            "queue": "",
            "timezone": "",
            "enabled": "1",
            "skip_if_running": "1",
        },
    ),
    (
        "/projects/{project}/schedules/{schedule}",
        {
            "name": "n3-UNIQUE",
            "task": "app.t",
            "schedule_type": "interval",
            "expression": "5m",
            "args": "[]",
            "kwargs": "{}",
            "queue": "",
            "timezone": "",
        },
    ),
    (
        "/projects/{project}/alerts",
        {
            "name": "r2-UNIQUE",
            "kind": "queue_depth",
            "threshold": "5",
            "window_seconds": "300",
            "min_tasks": "1",
            "task_name": "",
            "queue": "q",
            "agent_name": "",
            "webhook_url": "https://h.example.com/x",
            "emails": "a@example.com",
        },
    ),
    ("/projects/{project}/alerts/{rule}/enabled", {"enabled": "0"}),
]
FORM_CASES = [(p, *case) for p, f in FORMS for case in dashboard_form_cases(f)]


@pytest.mark.parametrize(
    ("path", "label", "body", "must"), FORM_CASES, ids=[f"{c[0]} {c[1]}" for c in FORM_CASES]
)
async def test_forms_refuse(
    world: tuple[Seed, httpx.AsyncClient, dict[str, str]],
    path: str,
    label: str,
    body: bytes,
    must: bool,
) -> None:
    token = f"csrf_token={world[2]['csrf']}&".encode()
    answer = await refused(world, "POST", path, token + body, "application/x-www-form-urlencoded")
    assert_answered(label, answer, must)


@pytest.mark.parametrize("path", [p for p, _ in FORMS])
async def test_forms_refuse_a_huge_body(
    world: tuple[Seed, httpx.AsyncClient, dict[str, str]], path: str
) -> None:
    body = f"csrf_token={world[2]['csrf']}&name=".encode() + b"x" * HUGE
    answer = await refused(world, "POST", path, body, "application/x-www-form-urlencoded")
    assert answer.status_code == 413


ODD = [
    ("/schedules", {"schedule_type": "date", "expression": "9999-12-31T23:59:00-14:00"}),
    ("/schedules", {"schedule_type": "date", "expression": "0001-01-01T00:00:00+14:00"}),
    ("/schedules", {"schedule_type": "cron", "expression": "99999999999999999999 * * * *"}),
    ("/schedules", {"schedule_type": "cron", "expression": "*/0 * * * *"}),
    ("/schedules", {"schedule_type": "interval", "expression": "99999999d99999999h"}),
    ("/schedules", {"timezone": "../../etc/passwd"}),
    ("/schedules", {"timezone": "Etc/GMT+99"}),
    ("/schedules", {"queue": "a\u2028b"}),
    ("/schedules", {"kwargs": {"": 1}}),
    ("/alert-rules", {"webhook_url": "http://[::1"}),
    ("/alert-rules", {"webhook_url": "http://[x]/"}),
    ("/alert-rules", {"webhook_url": "https://h:99999999/"}),
    ("/alert-rules", {"threshold": 1e308}),
    ("/alert-rules", {"threshold": 5e-324}),
    ("/alert-rules", {"window_seconds": 9223372036854775807}),
    ("/alert-rules", {"emails": ["a@" + "b" * 300 + ".com"]}),
]


@pytest.mark.parametrize(("path", "change"), ODD, ids=[json.dumps(c)[:60] for _, c in ODD])
async def test_odd_values_are_refused_or_kept_readable(
    world: tuple[Seed, httpx.AsyncClient, dict[str, str]], path: str, change: dict[str, Any]
) -> None:
    """Values each field's type allows but its rules may not: a 4xx, or stored so that the
    list still reads."""
    _seed, http, ids = world
    fields = {**(SCHEDULE if path == "/schedules" else RULE), **change}
    body = json.dumps(fields).encode()
    if path == "/alert-rules" and "threshold" not in change:
        body = body.replace(b'"failure_rate"', b'"queue_depth"')
    answer = await refused(world, "POST", f"/api/v1/projects/{{project}}{path}", body,
                           "application/json")  # fmt: skip
    assert answer.status_code in (201, 409, 422), answer.text[:300]
    for read in ("/schedules", "/alerts"):
        listed = await http.get(f"/api/v1/projects/{ids['project']}{read}")
        assert listed.status_code == 200, listed.text[:300]
    page = await http.get(f"/projects/{ids['project']}/schedules")
    assert page.status_code == 200
