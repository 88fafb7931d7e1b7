"""Trends: buckets of finished tasks with failure rate and runtime percentiles, per task name
and queue, through the API and the dashboard's SVG page; the task page's return value, retry
reasons and times in the project's zone."""

from __future__ import annotations

import re
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
from z4j.domain.trends import WINDOWS, bucket_start
from z4j.ingest.fold import fold_batch, scoped_id
from z4j.store.ingest import write_folded

from .conftest import Seed


def finished_tasks(url: str, project: uuid.UUID, rows: list[tuple[Any, ...]]) -> None:
    """rows of (name, queue, state, finished_at, runtime_ms)."""
    with psycopg.connect(url) as conn:
        for name, queue, state, at, runtime in rows:
            conn.execute(
                "INSERT INTO tasks (id, project_id, engine, name, queue, state, enqueued_at,"
                " started_at, finished_at, runtime_ms) VALUES (%s, %s, 'celery', %s, %s, %s,"
                " %s, %s, %s, %s)",
                (uuid.uuid4(), project, name, queue, state, at, at, at, runtime),
            )


async def test_trends_count_rate_and_percentiles_per_bucket(seed: Seed, z4j_database: str) -> None:
    owner = await seed.user("own@example.com")
    project = await seed.project(owner)
    other = await seed.project(owner)
    window = WINDOWS["1h"]
    now = datetime.now(UTC)
    recent = bucket_start(now, window.step) - 5 * window.step + timedelta(seconds=1)
    rows = [("app.add", "fast", "succeeded", recent, float(ms)) for ms in range(1, 101)]
    rows += [("app.add", "fast", "failed", recent, 1000.0)] * 25
    rows += [("app.mail", "slow", "succeeded", recent - 10 * window.step, 50.0)] * 3
    rows += [("app.add", "fast", "started", recent, None)]  # not finished: never counted
    rows += [("app.old", "fast", "succeeded", now - timedelta(hours=3), 1.0)]  # outside
    finished_tasks(z4j_database, project, rows)
    finished_tasks(z4j_database, other, [("app.add", "fast", "failed", recent, 1.0)] * 7)

    async with seed.signed_in("own@example.com") as http:
        got = await http.get(f"/api/v1/projects/{project}/trends", params={"window": "1h"})
        assert got.status_code == 200, got.text
        body = got.json()
        assert (body["finished"], body["failed"]) == (128, 25)
        assert len(body["buckets"]) == 60
        busy = [b for b in body["buckets"] if b["finished"]]
        assert [b["finished"] for b in busy] == [3, 125]
        assert busy[1]["failure_rate"] == 20.0
        assert busy[1]["runtime_p50_ms"] == 63.0  # median of 1..100 and 25 x 1000
        assert busy[1]["runtime_p95_ms"] == 1000.0
        assert [g["key"] for g in body["by_name"]] == ["app.add", "app.mail"]
        assert [g["key"] for g in body["by_queue"]] == ["fast", "slow"]

        by_queue = (
            await http.get(f"/api/v1/projects/{project}/trends?window=1h&queue=slow")
        ).json()
        assert (by_queue["finished"], by_queue["failed"]) == (3, 0)
        assert [g["key"] for g in by_queue["by_name"]] == ["app.mail"]  # names in that queue
        by_name = (
            await http.get(f"/api/v1/projects/{project}/trends?window=1h&name=app.add")
        ).json()
        assert (by_name["finished"], by_name["failed"]) == (125, 25)

        bad = await http.get(f"/api/v1/projects/{project}/trends?window=2y")
        assert bad.status_code == 422
        assert bad.json()["field"] == "window"

        page = await http.get(f"/projects/{project}/trends?window=1h&name=app.add")
        assert page.status_code == 200
        html = page.text
        assert html.count("<svg") == 3
        assert re.search(r'<rect class="bar" [^>]*><title>[0-9:]+: 125</title>', html)
        assert 'class="line s-p95"' in html
        assert "<script" not in html.split("</head>")[1]  # the charts need no script

    stranger = await seed.user("else@example.com")
    await seed.project(stranger)
    async with seed.signed_in("else@example.com") as http:
        hidden = await http.get(f"/api/v1/projects/{project}/trends")
        assert hidden.status_code == 404
        assert (await http.get(f"/projects/{project}/trends")).status_code == 404


def event(n: int, kind: str, at: datetime, **data: Any) -> dict[str, Any]:
    return {"id": f"ev-{n}", "kind": kind, "task_id": "celery-9", "engine": "celery",
            "occurred_at": at.isoformat().replace("+00:00", "Z"), "data": data}  # fmt: skip


async def test_task_page_shows_result_retries_and_the_project_zone(seed: Seed) -> None:
    owner = await seed.user("own@example.com")
    project = await seed.project(owner)
    created = await seed.agent(owner, project)
    t0 = datetime(2026, 7, 1, 12, 0, tzinfo=UTC)
    events = [
        event(1, "task.sent", t0, task_name="app.pay", queue="billing"),
        event(2, "task.started", t0 + timedelta(seconds=1)),
        event(
            3,
            "task.retried",
            t0 + timedelta(seconds=2),
            retry_count=1,
            reason="Retry in 5s: ConnectionError('gateway down')",
            exception={"type": "ConnectionError", "message": "gateway down"},
        ),
        event(4, "task.started", t0 + timedelta(seconds=8)),
        event(
            5,
            "task.succeeded",
            t0 + timedelta(seconds=9),
            runtime_ms=12.0,
            result="{'paid': True, 'password': 'hunter2'}",
        ),
    ]
    async with seed.brain.project_tx(project) as conn:
        await write_folded(conn, project, created.agent["id"], fold_batch(project, events))
    task_id = scoped_id(project, "celery-9")
    async with seed.signed_in("own@example.com") as http:
        html = (await http.get(f"/projects/{project}/tasks/{task_id}")).text
        assert "Return value" in html
        assert "&#39;paid&#39;: True" in html
        assert "ConnectionError" in html
        assert "Retry in 5s" in html
        assert "2026-07-01 12:00:09 UTC" in html
        changed = await http.put(
            f"/api/v1/projects/{project}/retention", json={"timezone": "Europe/Berlin"}
        )
        assert changed.status_code == 200
        html = (await http.get(f"/projects/{project}/tasks/{task_id}")).text
        assert "2026-07-01 14:00:09 CEST" in html
        assert "agent clock, Europe/Berlin" in html
