"""How events decide a task's state, whatever order they arrive in.

Each state-changing event has a key ``(not pending, attempt, agent timestamp, rank)``; a task's
state is that of the event with the greatest key. Taking a maximum does not depend on arrival
order, so late or duplicated events never move a task backwards. Celery retries reuse the task
id (started -> retried -> started -> succeeded); the attempt (the event's retry count) orders
them first, because Celery republishes a retried task before it reports the retry, so the next
attempt may finish before the ``retried`` event of the previous one is even stamped. Within an
attempt the agent's clock decides. A ``task_sent`` seen after the worker already reported never
drags the task back to pending, even when the producer's clock runs ahead of the worker's.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum


class TaskState(StrEnum):
    PENDING = "pending"
    STARTED = "started"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"
    RETRIED = "retried"
    LOST = "lost"


TERMINAL = frozenset(
    {TaskState.SUCCEEDED, TaskState.FAILED, TaskState.CANCELLED, TaskState.RETRIED, TaskState.LOST}
)

# Ties on the agent clock go to the state further along; every state has its own rank so the
# order is total and the outcome never depends on arrival order.
RANK = {
    TaskState.PENDING: 0,
    TaskState.STARTED: 1,
    TaskState.RETRIED: 2,
    TaskState.LOST: 3,
    TaskState.CANCELLED: 4,
    TaskState.FAILED: 5,
    TaskState.SUCCEEDED: 6,
}


# An event without a retry count could belong to any attempt; it sorts as the latest, so agents
# that never send the count are ordered by their clock alone, and a terminal event without one
# is never hidden by a retry that has one.
UNKNOWN_ATTEMPT = 2**31 - 1

Claim = tuple[TaskState, datetime, int]
"""A state, the agent time it was reached, and the attempt (retry count) it belongs to."""


StateKey = tuple[bool, int, datetime, int]
"""Orders state claims (settled, attempt, agent time, rank); the greatest is the task's state."""


def state_key(state: TaskState, at: datetime, attempt: int) -> StateKey:
    return (state is not TaskState.PENDING, attempt, at, RANK[state])


def winner(current: Claim | None, claim: Claim) -> Claim:
    """The claim that stands after ``claim`` meets ``current``."""
    if current is None:
        return claim
    return claim if state_key(*claim) > state_key(*current) else current


def finished_at(state: TaskState, state_at: datetime) -> datetime | None:
    return state_at if state in TERMINAL else None


# What a person may run again: a task that ended without its result. Cancelled was a person's
# choice and retried has a later attempt of its own.
RETRIABLE = frozenset({TaskState.FAILED, TaskState.LOST})


def is_retriable(state: TaskState) -> bool:
    return state in RETRIABLE


def retriable_states() -> tuple[str, ...]:
    """The task list's filter for "what can be retried", in the vocabulary's order."""
    return tuple(s.value for s in TaskState if s in RETRIABLE)


# A task can only be lost while a worker runs it: pending tasks still wait in the broker, which
# delivers them again, and a terminal state is final.
LOSABLE = frozenset({TaskState.STARTED})


def lost_claim(current: Claim) -> Claim | None:
    """The claim the brain makes when ``current``'s worker is gone, or None when it cannot be
    lost. It keeps the agent time and attempt of the started claim, and wins over it only by
    rank, so any later real event of the task (a finish, a retry, a next attempt) still wins."""
    state, at, attempt = current
    if state not in LOSABLE:
        return None
    return (TaskState.LOST, at, attempt)
