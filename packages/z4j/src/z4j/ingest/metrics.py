"""Prometheus task metrics, counted as ingest stores events (exported on the brain's /metrics).

- ``z4j_tasks_total{project, task, queue, state}``: task events stored, by the state each
  reports (``pending`` for a sent task, ``started``, ``succeeded``, ``failed``, ``retried``,
  ``cancelled``; an expiry counts as ``cancelled``);
- ``z4j_task_runtime_seconds{project, task, queue, state}``: a histogram of the runtime that
  succeeded and failed tasks report.

``project`` is the project id (names can change), ``task`` the task name. A batch resent after
a lost acknowledgement is stored once but counted again: the counters are a rate of what agents
report, the task list is the record. Task names come from agents, so the series are bounded:
past ``MAX_SERIES`` (project, task, queue) sets in one process, new ones count as
``task="(other)"``.
"""

from __future__ import annotations

import uuid

from prometheus_client import Counter, Histogram

from z4j.ingest.fold import Folded

LABELS = ("project", "task", "queue", "state")
MAX_SERIES = 5000
UNKNOWN, OTHER = "(unknown)", "(other)"
STATE_OF = {"task_sent": "pending", "started": "started", "succeeded": "succeeded",
            "failed": "failed", "retry": "retried", "cancelled": "cancelled",
            "expired": "cancelled"}  # fmt: skip
BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0,
           900.0, 3600.0)  # fmt: skip

TASKS = Counter("z4j_tasks", "Task events stored, by the state they report", LABELS)
RUNTIME = Histogram(
    "z4j_task_runtime_seconds", "Runtime reported by succeeded and failed tasks", LABELS,
    buckets=BUCKETS,
)  # fmt: skip
_series: set[tuple[str, str, str]] = set()


def _key(project: str, task: str | None, queue: str | None) -> tuple[str, str, str]:
    key = (project, task or UNKNOWN, queue or UNKNOWN)
    if key in _series:
        return key
    if len(_series) >= MAX_SERIES:
        return (project, OTHER, queue or UNKNOWN)
    _series.add(key)
    return key


def observe(project_id: uuid.UUID, folded: Folded) -> None:
    """Count the events of a batch just stored."""
    if not folded.events:
        return
    project = str(project_id)
    tasks = {t.id: t for t in folded.tasks.values()}
    for event in folded.events:
        state = STATE_OF.get(event.event_type)
        if state is None:
            continue
        task = tasks.get(event.task_id)
        key = _key(project, task.name if task else None, task.queue if task else None)
        TASKS.labels(*key, state).inc()
        runtime = event.payload.get("runtime_ms") if state in ("succeeded", "failed") else None
        if isinstance(runtime, int | float) and not isinstance(runtime, bool) and runtime >= 0:
            RUNTIME.labels(*key, state).observe(float(runtime) / 1000.0)
