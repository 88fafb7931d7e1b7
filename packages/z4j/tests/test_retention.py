"""Per-project retention on real PostgreSQL: expired tasks and events go and fresh ones stay,
each project by its own settings; every delete statement removes at most the batch's rows; a
pass stopped early leaves a backlog that is shown; one replica at a time (advisory lock);
settings out of bounds are a 422 naming the field; viewers and operators cannot change them,
admins and owners can, audited; the dashboard's project page shows and saves them."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import psycopg
import pytest
from hypothesis import given
from hypothesis import strategies as st
from z4j.actions import retention
from z4j.controllers.retention import LOCK_KEY, purge_once
from z4j.domain.retention import (
    MAX_DAYS,
    MIN_DAYS,
    Retention,
    RetentionInvalid,
    parse_change,
)
from z4j.ingest.batch import ingest_batch

from .conftest import Seed
from .hostile import form_token

NOW = datetime.now(UTC)


def add_history(seed: Seed, project: uuid.UUID, ages_days: list[float], events: int = 1) -> None:
    """A task this many days old for each age, with ``events`` events received at that time."""
    with psycopg.connect(seed.admin_url) as conn:
        for age in ages_days:
            at = NOW - timedelta(days=age)
            task = uuid.uuid4()
            conn.execute(
                "INSERT INTO tasks (id, project_id, engine, name, created_at, updated_at)"
                " VALUES (%s, %s, 'celery', %s, %s, %s)",
                (task, project, f"age-{age}", at, at),
            )
            for _ in range(events):
                conn.execute(
                    "INSERT INTO events (id, task_id, project_id, event_type, ts, created_at)"
                    " VALUES (%s, %s, %s, 'succeeded', %s, %s)",
                    (uuid.uuid4(), task, project, at, at),
                )


def left(seed: Seed, project: uuid.UUID) -> tuple[list[str], list[str]]:
    """Names of the project's tasks, and of the tasks of its events, oldest first."""
    with psycopg.connect(seed.admin_url) as conn:
        tasks = conn.execute(
            "SELECT name FROM tasks WHERE project_id = %s ORDER BY created_at", (project,)
        ).fetchall()
        events = conn.execute(
            "SELECT t.name FROM events e JOIN tasks t ON t.id = e.task_id"
            " WHERE e.project_id = %s ORDER BY e.created_at",
            (project,),
        ).fetchall()
    return [r[0] for r in tasks], [r[0] for r in events]


async def test_expired_rows_go_and_fresh_ones_stay_by_each_projects_settings(seed: Seed) -> None:
    owner = await seed.user("own@example.com")
    default, short = await seed.project(owner), await seed.project(owner)

    await retention.change(
        seed.ctx(owner), short, {"task_retention_days": 5, "event_retention_days": 2}
    )
    add_history(seed, default, [40, 20, 10, 1])
    add_history(seed, short, [40, 20, 10, 4, 1])
    done = await purge_once(seed.brain, pause=0)
    assert done.ran
    # defaults: tasks 30 days, events 14
    assert left(seed, default) == (["age-20", "age-10", "age-1"], ["age-10", "age-1"])
    assert left(seed, short) == (["age-4", "age-1"], ["age-1"])
    by_project = {p.project_id: p for p in done.projects}
    assert (by_project[short].tasks, by_project[short].events) == (3, 4)
    assert by_project[short].backlog == 0
    # idempotent: a second pass finds nothing more
    again = await purge_once(seed.brain, pause=0)
    assert all(p.tasks == p.events == 0 for p in again.projects)
    assert left(seed, short) == (["age-4", "age-1"], ["age-1"])


async def test_every_statement_deletes_at_most_a_batch_and_the_backlog_is_shown(
    seed: Seed,
) -> None:
    owner = await seed.user("own@example.com")
    project = await seed.project(owner)
    add_history(seed, project, [40.0 + i / 100 for i in range(23)], events=2)  # 23 tasks, 46 events
    add_history(seed, project, [20.0 + i / 100 for i in range(11)], events=2)  # events expire only
    stopped = await purge_once(seed.brain, batch_rows=5, pause=0, max_batches=3)
    [first] = stopped.projects
    assert first.statements == [5, 5, 5]
    assert first.backlog > 0
    done = await purge_once(seed.brain, batch_rows=5, pause=0)
    [rest] = done.projects
    assert rest.statements
    assert max(rest.statements) <= 5
    assert rest.backlog == 0
    assert left(seed, project) == ([f"age-{20.0 + i / 100}" for i in reversed(range(11))], [])
    assert first.events + rest.events == 46 + 22
    assert first.tasks + rest.tasks == 23
    async with seed.signed_in("own@example.com") as http:
        shown = (await http.get(f"/api/v1/projects/{project}/retention")).json()
    assert shown["last_run"]["backlog"] == 0
    assert shown["last_run"]["total_deleted"] == 46 + 22 + 23
    assert (shown["last_run"]["tasks_deleted"], shown["last_run"]["events_deleted"]) == (
        rest.tasks,
        rest.events,
    )


async def test_a_retried_task_that_outlives_its_retry_keeps_its_row(seed: Seed) -> None:
    owner = await seed.user("own@example.com")
    project = await seed.project(owner)
    add_history(seed, project, [40, 1])
    with psycopg.connect(seed.admin_url) as conn:
        conn.execute(  # the fresh task names the old one as its retry
            "UPDATE tasks SET retried_as = (SELECT id FROM tasks WHERE name = 'age-40')"
            " WHERE name = 'age-1'"
        )
    await purge_once(seed.brain, pause=0)
    assert left(seed, project)[0] == ["age-1"]


async def test_one_replica_at_a_time(seed: Seed) -> None:
    owner = await seed.user("own@example.com")
    project = await seed.project(owner)
    add_history(seed, project, [40])
    with psycopg.connect(seed.admin_url, autocommit=True) as other:
        other.execute("SELECT pg_advisory_lock(%s)", (LOCK_KEY,))
        assert not (await purge_once(seed.brain, pause=0)).ran
        assert left(seed, project)[0] == ["age-40"]
        other.execute("SELECT pg_advisory_unlock(%s)", (LOCK_KEY,))
    assert (await purge_once(seed.brain, pause=0)).ran
    assert left(seed, project)[0] == []


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"task_retention_days": 0}, "task_retention_days"),
        ({"task_retention_days": 3651}, "task_retention_days"),
        ({"task_retention_days": 2**62}, "task_retention_days"),
        ({"task_retention_days": 2**70}, "task_retention_days"),
        ({"task_retention_days": "30"}, "task_retention_days"),
        ({"task_retention_days": True}, "task_retention_days"),
        ({"event_retention_days": -1}, "event_retention_days"),
        ({"event_retention_days": 31}, "event_retention_days"),  # more than tasks' 30
        ({"timezone": "Mars/Olympus"}, "timezone"),
        ({"timezone": "Europe/\u0000Paris"}, "timezone"),
        ({"timezone": "x" * 65}, "timezone"),
        ({"keep_forever": True}, "keep_forever"),
    ],
)
async def test_hostile_settings_are_422_naming_the_field(
    seed: Seed, body: dict[str, object], field: str
) -> None:
    owner = await seed.user("own@example.com")
    project = await seed.project(owner)
    async with seed.signed_in("own@example.com") as http:
        answer = await http.put(f"/api/v1/projects/{project}/retention", json=body)
        assert answer.status_code == 422, answer.text
        problem = answer.json()  # the model's errors[], or the action's own field
        named = [problem.get("field")] + [e["field"] for e in problem.get("errors", [])]
        assert field in named, answer.text
        kept = (await http.get(f"/api/v1/projects/{project}/retention")).json()
    assert (kept["task_retention_days"], kept["event_retention_days"]) == (30, 14)


async def test_viewers_and_operators_cannot_change_settings_admins_and_owners_can(
    seed: Seed,
) -> None:
    owner = await seed.user("own@example.com")
    project = await seed.project(owner)
    for role in ("viewer", "operator", "admin"):
        await seed.member(project, await seed.user(f"{role}@example.com"), role)
    path = f"/api/v1/projects/{project}/retention"
    for role in ("viewer", "operator"):
        async with seed.signed_in(f"{role}@example.com") as http:
            assert (await http.get(path)).status_code == 200
            refused = await http.put(path, json={"task_retention_days": 7})
            assert refused.status_code == 403, refused.text
    async with seed.signed_in("admin@example.com") as http:
        saved = await http.put(path, json={"task_retention_days": 60, "timezone": "Asia/Tokyo"})
        assert saved.status_code == 200, saved.text
        assert saved.json()["task_retention_days"] == 60
    async with seed.signed_in("own@example.com") as http:
        saved = await http.put(path, json={"event_retention_days": 7})
        assert saved.json() | {"last_run": None} == {
            "task_retention_days": 60, "event_retention_days": 7, "timezone": "Asia/Tokyo",
            "redact_keys": [], "last_run": None,
        }  # fmt: skip
    with psycopg.connect(seed.admin_url) as conn:
        rows = conn.execute(
            "SELECT details FROM audit_log WHERE action = 'project.retention'"
            " AND project_id = %s ORDER BY ts",
            (project,),
        ).fetchall()
    assert [r[0]["after"]["task_retention_days"] for r in rows] == [60, 60]
    assert rows[0][0]["before"]["task_retention_days"] == 30


async def test_the_project_page_shows_and_saves_retention(seed: Seed) -> None:
    owner = await seed.user("own@example.com")
    project = await seed.project(owner)
    await seed.member(project, await seed.user("view@example.com"), "viewer")
    add_history(seed, project, [40])
    await purge_once(seed.brain, pause=0)
    async with seed.signed_in("own@example.com") as http:
        page = await http.get(f"/projects/{project}/members")
        assert 'id="retention"' in page.text
        assert "1 tasks and 1 events deleted" in page.text
        form = {"csrf_token": form_token(page.text), "task_retention_days": "90",
                "event_retention_days": "20", "timezone": "Europe/Paris",
                "redact_keys": "order_ref, card_pan"}  # fmt: skip
        saved = await http.post(f"/projects/{project}/retention", data=form)
        assert saved.status_code == 200
        assert "Retention saved." in saved.text
        bad = await http.post(f"/projects/{project}/retention", data={**form, "timezone": "Nope"})
        assert bad.status_code == 422
        assert "timezone" in bad.text
        assert (await http.get(f"/api/v1/projects/{project}/retention")).json()[
            "task_retention_days"
        ] == 90
    async with seed.signed_in("view@example.com") as http:
        page = await http.get(f"/projects/{project}/members")
        assert "Tasks are kept 90 days" in page.text
        assert "Also masked in events: order_ref, card_pan." in page.text
        assert 'action="/projects/' + str(project) + '/retention"' not in page.text


@given(task=st.integers(-5, MAX_DAYS + 5), event=st.integers(-5, MAX_DAYS + 5))
def test_only_bounded_settings_are_accepted(task: int, event: int) -> None:
    change = {"task_retention_days": task, "event_retention_days": event}
    ok = MIN_DAYS <= task <= MAX_DAYS and MIN_DAYS <= event <= task
    try:
        got = parse_change(Retention(), change)
    except RetentionInvalid:
        assert not ok
    else:
        assert ok
        assert (got.task_days, got.event_days) == (task, event)


async def test_a_projects_redact_keys_extend_the_built_in_ones(seed: Seed) -> None:
    """Values under the project's own keys are masked on receipt, in that project only; the
    built-in sensitive keys stay masked everywhere."""
    owner = await seed.user("own@example.com", is_admin=True)
    mine, other = await seed.project(owner), await seed.project(owner)
    await retention.change(seed.ctx(owner), mine, {"redact_keys": ["order_ref", "card.pan"]})
    now = datetime.now(UTC).isoformat()
    kwargs = {"order_ref": "R-123", "customer": "c-1", "password": "hunter2"}
    for project in (mine, other):
        agent_id = (await seed.agent(owner, project)).agent["id"]
        event = {"id": "e-1", "kind": "task.sent", "task_id": "t-1", "occurred_at": now,
                 "data": {"task_name": "app.add", "kwargs": kwargs}}  # fmt: skip
        outcome = await ingest_batch(seed.brain, project, agent_id, [event], suspect=False)
        assert outcome.accepted == 1
    with psycopg.connect(seed.admin_url) as conn:
        stored = dict(
            conn.execute(
                "SELECT project_id, kwargs_redacted FROM tasks WHERE project_id IN (%s, %s)",
                (mine, other),
            ).fetchall()
        )
    assert stored[mine]["order_ref"] != "R-123"
    assert stored[other]["order_ref"] == "R-123"
    for project in (mine, other):
        assert stored[project]["customer"] == "c-1"
        assert stored[project]["password"] != "hunter2"


@pytest.mark.parametrize(
    "keys", [["ok", "bad key"], ["x" * 101], [""], ["k"] * 51, "order_ref", [1], ["a\u0000"]]
)
async def test_hostile_redact_keys_are_422(seed: Seed, keys: object) -> None:
    owner = await seed.user("own@example.com")
    project = await seed.project(owner)
    async with seed.signed_in("own@example.com") as http:
        answer = await http.put(f"/api/v1/projects/{project}/retention", json={"redact_keys": keys})
    assert answer.status_code == 422, answer.text
    problem = answer.json()
    named = [problem.get("field")] + [e["field"] for e in problem.get("errors", [])]
    assert any(str(n).startswith("redact_keys") for n in named), answer.text
