"""What the dashboard says when a task's state cannot be known: a task whose start never
comes. Celery reports starts and outcomes of a prefork pool's tasks only through its
task events, which a worker sends only with ``-E`` (``worker_send_task_events``); the z4j-celery
agent reads them, so on such a worker every task it receives stays pending. Our agent records
them in the pool processes and needs no events."""

from __future__ import annotations

from datetime import datetime, timedelta

from z4j.domain.taskstate import TaskState

REMEDY = (
    "If it never moves, the worker sends no task events: a prefork worker started without -E "
    "does not, and the z4j-celery agent learns of starts and outcomes only from those events. "
    "Start the worker with -E, or set worker_send_task_events = True in its Celery "
    "configuration (our agent, z4j-agent, needs neither)."
)


def unreported_start(
    state: TaskState,
    worker: str | None,
    received_at: datetime | None,
    now: datetime,
    after: timedelta,
) -> str | None:
    """The notice for a pending task enqueued or received at ``received_at`` (by ``worker``
    when the agent says so) whose start was never reported for longer than ``after`` (a task
    may wait in its queue or behind others in a worker's prefetch; the setting
    ``no_start_after_seconds``), or None. The z4j-celery agent names no worker on receipt."""
    if state is not TaskState.PENDING or received_at is None:
        return None
    waited = now - received_at
    if waited <= after:
        return None
    by = f" by {worker}" if worker else ""
    return (
        f"Received{by} {int(waited.total_seconds())} s ago, and no start has been reported. "
        f"A task waits here while it is queued or the workers are busy with others. {REMEDY}"
    )


def agent_sends_no_starts(received_waiting: int, progressed: int) -> bool:
    """A worker agent with tasks that wait past ``no_start_after_seconds`` while none of its tasks
    moved past pending since it connected."""
    return received_waiting > 0 and progressed == 0
