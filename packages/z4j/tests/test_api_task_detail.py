"""One task: fields, redacted args, the error, and the timeline in agent-clock order."""

from __future__ import annotations

import random
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
from z4j.ingest.fold import fold_batch, scoped_id
from z4j.store.ingest import write_folded

from .conftest import Seed

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def event(n: int, kind: str, at: datetime, **data: Any) -> dict[str, Any]:
    return {
        "id": f"ev-{n}",
        "kind": kind,
        "task_id": "celery-123",
        "engine": "celery",
        "occurred_at": at.isoformat().replace("+00:00", "Z"),
        "data": data,
    }


async def test_detail_shows_the_timeline_in_agent_time_order(seed: Seed) -> None:
    owner = await seed.user("own@example.com")
    project = await seed.project(owner)
    created = await seed.agent(owner, project)
    agent_id = created.agent["id"]
    events = [
        event(
            1,
            "task.sent",
            T0,
            task_name="app.billing.charge",
            queue="billing",
            args=[42, "card"],
            kwargs={"password": "hunter2", "amount": 10},
        ),
        event(2, "task.started", T0 + timedelta(seconds=1), worker="w1@host"),
        event(3, "task.retried", T0 + timedelta(seconds=2), retry_count=1),
        event(4, "task.started", T0 + timedelta(seconds=3), worker="w2@host"),
        event(
            5,
            "task.failed",
            T0 + timedelta(seconds=4),
            runtime_ms=1234.5,
            exception={"type": "ValueError", "message": "card declined"},
            traceback="Traceback (most recent call last):\n  ...\nValueError: card declined",
        ),
    ]
    random.Random(7).shuffle(events)  # arrival order differs from agent order
    for batch in (events[:2], events[2:4], events[4:]):
        async with seed.brain.project_tx(project) as conn:
            await write_folded(conn, project, agent_id, fold_batch(project, batch))
    task_id = scoped_id(project, "celery-123")
    async with seed.signed_in("own@example.com") as http:
        response = await http.get(f"/api/v1/projects/{project}/tasks/{task_id}")
    assert response.status_code == 200
    task = response.json()
    assert [e["event_type"] for e in task["events"]] == [
        "task_sent",
        "started",
        "retry",
        "started",
        "failed",
    ]
    assert task["state"] == "failed"
    assert task["name"] == "app.billing.charge"
    assert task["engine_task_id"] == "celery-123"
    assert task["agent_name"] == "workers"
    assert task["args"] == [42, "card"]
    assert task["kwargs"]["amount"] == 10
    assert task["kwargs"]["password"] != "hunter2"
    assert task["error"] == {
        "exc_type": "ValueError",
        "exc_msg": "card declined",
        "traceback_redacted": "Traceback (most recent call last):\n  ...\n"
        "ValueError: card declined",
    }
    assert task["retries"] == 1
    assert task["runtime_ms"] == 1234.5
    assert task["worker"] in ("w1@host", "w2@host")  # ingest keeps the last one to arrive


async def test_equal_agent_times_fall_back_to_receipt_time(seed: Seed, z4j_database: str) -> None:
    owner = await seed.user("own@example.com")
    project = await seed.project(owner)
    [task] = seed.tasks(project, [{}])
    received = datetime.now(UTC)
    with psycopg.connect(z4j_database) as conn:
        for kind, ts, got in [
            ("succeeded", T0, received + timedelta(seconds=2)),
            ("started", T0, received + timedelta(seconds=1)),
            ("task_sent", T0 - timedelta(seconds=1), received + timedelta(3)),
        ]:
            conn.execute(
                "INSERT INTO events (id, task_id, project_id, event_type, ts, "
                "created_at) VALUES (%s, %s, %s, %s, %s, %s)",
                (uuid.uuid4(), task, project, kind, ts, got),
            )
    async with seed.signed_in("own@example.com") as http:
        body = (await http.get(f"/api/v1/projects/{project}/tasks/{task}")).json()
    assert [e["event_type"] for e in body["events"]] == ["task_sent", "started", "succeeded"]
    assert body["error"] is None


async def test_unknown_task_is_404(seed: Seed) -> None:
    owner = await seed.user("own@example.com")
    project = await seed.project(owner)
    async with seed.signed_in("own@example.com") as http:
        response = await http.get(f"/api/v1/projects/{project}/tasks/{uuid.uuid4()}")
    assert response.status_code == 404
    assert response.json()["code"] == "task.not_found"
