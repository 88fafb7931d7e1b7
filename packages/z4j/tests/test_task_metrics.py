"""The brain's /metrics counts stored task events by project, task name, queue and state, and
histograms the runtimes finished tasks report."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from prometheus_client.parser import text_string_to_metric_families
from z4j.ingest.batch import ingest_batch

from .conftest import Seed


def event(task: str, kind: str, at: datetime, **data: Any) -> dict[str, Any]:
    return {"id": str(uuid.uuid4()), "kind": kind, "task_id": task, "engine": "celery",
            "occurred_at": at.isoformat().replace("+00:00", "Z"), "data": data}  # fmt: skip


def samples(text: str, project: uuid.UUID, task: str) -> dict[tuple[str, ...], float]:
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.labels.get("project") == str(project) and s.labels.get("task") == task:
                le = (s.labels["le"],) if "le" in s.labels else ()
                out[(s.name, s.labels["state"], *le)] = s.value
    return out


async def test_metrics_count_tasks_by_state_and_histogram_runtimes(seed: Seed) -> None:
    owner = await seed.user("own@example.com")
    project = await seed.project(owner)
    agent = await seed.agent(owner, project)
    name = f"app.metered_{uuid.uuid4().hex[:6]}"
    t0 = datetime.now(UTC)
    events = []
    for i, (outcome, runtime) in enumerate([("succeeded", 40.0), ("succeeded", 3000.0),
                                            ("failed", 200.0)]):  # fmt: skip
        task = f"t{i}-{name}"
        events += [
            event(task, "task.sent", t0, task_name=name, queue="reports"),
            event(task, "task.started", t0 + timedelta(seconds=1), task_name=name),
            event(task, f"task.{outcome}", t0 + timedelta(seconds=2), task_name=name,
                  queue="reports", runtime_ms=runtime),
        ]  # fmt: skip
    done = await ingest_batch(seed.brain, project, agent.agent["id"], events, suspect=False)
    assert done.accepted == 9

    async with seed.signed_in("own@example.com") as http:
        text = (await http.get("/metrics")).text
    got = samples(text, project, name)
    assert got[("z4j_tasks_total", "pending")] == 3
    assert got[("z4j_tasks_total", "started")] == 3
    assert got[("z4j_tasks_total", "succeeded")] == 2
    assert got[("z4j_tasks_total", "failed")] == 1
    assert got[("z4j_task_runtime_seconds_count", "succeeded")] == 2
    assert got[("z4j_task_runtime_seconds_sum", "succeeded")] == 3.04
    assert got[("z4j_task_runtime_seconds_bucket", "succeeded", "0.05")] == 1  # the 40 ms one
    assert got[("z4j_task_runtime_seconds_bucket", "failed", "0.25")] == 1
    assert 'queue="reports"' in text
