"""Task definitions and enqueueing: what a job is called, how it retries, and ``spawn``.

``spawn`` writes the task through the caller's connection. Inside the caller's transaction the
task is only claimable once that transaction commits, and disappears with it on rollback: the
job is a side effect after commit by construction, with no outbox of our own.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from absurd_sdk import AsyncAbsurd, AsyncTaskContext, CancellationPolicy, RetryStrategy
from psycopg import AsyncConnection

Handler = Callable[[Any, AsyncTaskContext], Awaitable[Any]]
"""``async def handler(params, ctx)``: params are the spawned JSON; the return value is stored."""

DEFAULT_MAX_ATTEMPTS = 5
DEFAULT_RETRY: RetryStrategy = {
    "kind": "exponential",
    "base_seconds": 2.0,
    "factor": 2.0,
    "max_seconds": 300.0,
}


class JobsError(RuntimeError):
    """The jobs machinery is misconfigured (unknown task, missing queue, bad state)."""


@dataclass(frozen=True)
class Task:
    """A named handler and the defaults every spawn of it gets unless the caller overrides them.

    ``retry`` is absurd's retry strategy (``fixed``/``exponential``/``none``, with
    ``base_seconds``, ``factor``, ``max_seconds``); the delay before attempt n+1 is computed
    by absurd in the database when attempt n fails. ``None`` means ``DEFAULT_RETRY``
    (exponential from 2 s, doubling, at most 300 s).
    """

    name: str
    handler: Handler
    max_attempts: int = DEFAULT_MAX_ATTEMPTS
    retry: RetryStrategy | None = None
    cancellation: CancellationPolicy | None = None


@dataclass(frozen=True)
class Spawned:
    """The task as absurd recorded it; a repeated idempotency key returns the first task."""

    task_id: UUID
    run_id: UUID
    attempt: int


async def spawn(
    conn: AsyncConnection[Any],
    queue: str,
    task_name: str,
    params: Any,
    *,
    idempotency_key: str | None = None,
    max_attempts: int = DEFAULT_MAX_ATTEMPTS,
    retry: RetryStrategy | None = None,
    headers: dict[str, Any] | None = None,
    cancellation: CancellationPolicy | None = None,
) -> Spawned:
    """Enqueue ``task_name`` on ``queue`` through ``conn`` (in its transaction, if one is open).

    For code that enqueues without a ``JobRunner`` (a CLI, another system's action); the
    handler must be registered on some runner of ``queue``, or the run is deferred until one is.
    ``idempotency_key`` makes the spawn a no-op when a task with the same key exists in the
    queue (whatever its state), so an action retried after a crash queues its job once.
    """
    client = AsyncAbsurd(conn, queue_name=queue)
    row = await client.spawn(
        task_name,
        params,
        max_attempts=max_attempts,
        retry_strategy=retry if retry is not None else DEFAULT_RETRY,
        headers=headers,
        queue=queue,
        cancellation=cancellation,
        idempotency_key=idempotency_key,
    )
    return Spawned(_uuid(row["task_id"]), _uuid(row["run_id"]), int(row["attempt"]))


def _uuid(value: object) -> UUID:
    # The SDK types ids as str, psycopg returns UUID objects; accept both.
    return value if isinstance(value, UUID) else UUID(str(value))
