"""When a started task is lost, and when a lost one is found again: pure rules.

The brain cannot see a worker die; it sees a worker go silent, or stop listing the task. A
started task is lost when the worker connection that reported its start has not been heard from
(hello, heartbeat) for longer than the grace period, or when that worker's list of the tasks it
runs (``active_tasks`` in ``hello`` and ``heartbeat``, see docs/z4j/agent-protocol.md), taken
more than the grace period after the brain last heard of the task, leaves it out: a worker
restarted under the same name speaks again at once, but its list is empty. A lost task is found
again when its worker lists it.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from z4j.domain.taskstate import LOSABLE, TaskState


def silent_for(now: datetime, last_seen: datetime | None) -> timedelta | None:
    """How long the worker has been silent; None when it was never heard from."""
    return None if last_seen is None else max(now - last_seen, timedelta(0))


def lost_reason(
    state: TaskState,
    now: datetime,
    last_seen: datetime | None,
    grace: timedelta,
    *,
    changed_at: datetime | None = None,
    listed_at: datetime | None = None,
    listed: bool | None = None,
) -> str | None:
    """Why a task in ``state`` is lost, or None when it is not (yet).

    ``changed_at`` is when the brain last heard of the task; ``listed_at`` when its worker last
    sent its active tasks and ``listed`` whether the task was among them (None: the worker
    sends no such list)."""
    if state not in LOSABLE:
        return None
    silence = silent_for(now, last_seen)
    if silence is None:
        return "its worker was never heard from"
    if silence > grace:
        return (
            f"its worker has been silent for {int(silence.total_seconds())} s "
            f"(grace period {int(grace.total_seconds())} s)"
        )
    if listed is False and listed_at is not None and changed_at is not None:
        after = listed_at - changed_at
        if after > grace:
            return (
                f"its worker no longer lists it among the tasks it runs "
                f"({int(after.total_seconds())} s after the last news of it; "
                f"grace period {int(grace.total_seconds())} s)"
            )
    return None
