"""The mapping of wire event kinds onto our task states and event types.

Wire kinds come from agents (``task.sent``, ``task.started``, ...); the data model's vocabulary
is ours: states pending/started/succeeded/failed/cancelled/retried/lost and event types
task_sent/started/succeeded/failed/retry/cancelled/expired. ``task.received`` carries the worker
and queue but changes nothing a person cares about, so it updates the task without a timeline
row; ``worker.*`` events only refresh the agent's liveness.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from z4j.domain.taskstate import TaskState


@dataclass(frozen=True)
class Mapping:
    event_type: str | None
    state: TaskState | None


_TASK_KINDS: dict[str, Mapping] = {
    "task.sent": Mapping("task_sent", TaskState.PENDING),
    "task.received": Mapping(None, None),
    "task.started": Mapping("started", TaskState.STARTED),
    "task.succeeded": Mapping("succeeded", TaskState.SUCCEEDED),
    "task.failed": Mapping("failed", TaskState.FAILED),
    "task.retried": Mapping("retry", TaskState.RETRIED),
    "task.revoked": Mapping("cancelled", TaskState.CANCELLED),
    "task.rejected": Mapping("failed", TaskState.FAILED),
}

WORKER_KINDS = frozenset({"worker.online", "worker.offline", "worker.heartbeat"})
IGNORED_PREFIXES = ("queue.", "schedule.")


def map_task_event(kind: str, data: dict[str, Any]) -> Mapping | None:
    """Return how a task event counts, or None when ``kind`` is not a task event."""
    mapping = _TASK_KINDS.get(kind)
    if mapping is None:
        return None
    if kind == "task.revoked" and data.get("expired"):
        return Mapping("expired", TaskState.CANCELLED)
    return mapping
