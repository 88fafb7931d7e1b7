"""The job runner: one queue's registered tasks, spawned by actions and run by this process.

``JobRunner`` owns the lifecycle (start and stop with the server, a pool of its own when given a
URL, the queue check at start) and the registry that ``spawn`` validates names against; the
claim-and-run loops are ``platformkit.jobs.slots``.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable, Iterable
from types import TracebackType
from typing import Any, Self

from absurd_sdk import RetryStrategy
from psycopg import AsyncConnection

from platformkit.db.pool import open_pool
from platformkit.db.scope import Pool
from platformkit.jobs.slots import Slots
from platformkit.jobs.tasks import DEFAULT_MAX_ATTEMPTS, Handler, JobsError, Spawned, Task, spawn


class JobRunner:
    """Claims and runs tasks of ``queue`` with at most ``concurrency`` in flight.

    ``db`` is a pool (shared with the server: give it ``concurrency`` more connections than the
    server needs) or a URL (the runner then opens and closes a pool of its own). Use it as an
    async context manager, from a FastAPI lifespan, or call ``start()`` and ``stop()``.
    """

    def __init__(
        self,
        db: Pool | str,
        queue: str,
        tasks: Iterable[Task] = (),
        *,
        concurrency: int = 4,
        poll_interval: float = 0.5,
        claim_timeout: int = 60,
        stop_timeout: float = 30.0,
        worker_id: str | None = None,
    ) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        self.queue = queue
        self.concurrency = concurrency
        self.poll_interval = poll_interval
        self.claim_timeout = claim_timeout
        self.stop_timeout = stop_timeout
        self.worker_id = worker_id or f"{socket.gethostname()}:{os.getpid()}"
        self._db = db
        self._tasks: dict[str, Task] = {}
        self._slots: Slots | None = None
        self._own_pool: Pool | None = None
        for task in tasks:
            self.register(task)

    def register(self, task: Task) -> None:
        if self._slots is not None:
            raise JobsError("register tasks before start()")
        self._tasks[task.name] = task

    def task(
        self,
        name: str,
        *,
        max_attempts: int = DEFAULT_MAX_ATTEMPTS,
        retry: RetryStrategy | None = None,
    ) -> Callable[[Handler], Handler]:
        """Decorator form of ``register``: ``@runner.task("send_mail")``."""

        def decorate(handler: Handler) -> Handler:
            self.register(Task(name, handler, max_attempts=max_attempts, retry=retry))
            return handler

        return decorate

    async def spawn(
        self,
        conn: AsyncConnection[Any],
        task_name: str,
        params: Any,
        *,
        idempotency_key: str | None = None,
        max_attempts: int | None = None,
        retry: RetryStrategy | None = None,
        headers: dict[str, Any] | None = None,
    ) -> Spawned:
        """Enqueue a registered task through ``conn``; workers see it after ``conn`` commits."""
        task = self._tasks.get(task_name)
        if task is None:
            raise JobsError(f"task {task_name!r} is not registered on queue {self.queue!r}")
        return await spawn(
            conn,
            self.queue,
            task_name,
            params,
            idempotency_key=idempotency_key,
            max_attempts=max_attempts or task.max_attempts,
            retry=retry or task.retry,
            headers=headers,
            cancellation=task.cancellation,
        )

    @property
    def running(self) -> bool:
        return self._slots is not None

    @property
    def in_flight(self) -> int:
        """Tasks claimed by this runner and not yet finished."""
        return self._slots.in_flight if self._slots is not None else 0

    async def start(self) -> None:
        if self._slots is not None:
            raise JobsError("the runner is already started")
        pool = self._db
        if isinstance(pool, str):
            pool = self._own_pool = await open_pool(
                pool, max_size=self.concurrency + 1, name=f"jobs-{self.queue}"
            )
        async with pool.connection() as conn:
            cur = await conn.execute(
                "SELECT 1 FROM absurd.queues WHERE queue_name = %s", (self.queue,)
            )
            found = await cur.fetchone()
        if found is None:
            await self._close_own_pool()
            raise JobsError(
                f"queue {self.queue!r} does not exist: create it in a migration with "
                f"SELECT absurd.create_queue('{self.queue}');"
            )
        self._slots = Slots(
            pool,
            self.queue,
            dict(self._tasks),
            concurrency=self.concurrency,
            poll_interval=self.poll_interval,
            claim_timeout=self.claim_timeout,
            worker_id=self.worker_id,
        )
        self._slots.start()

    async def stop(self, grace: float | None = None) -> bool:
        """Stop claiming and wait for in-flight tasks; True when all finished in time.

        Tasks still running after ``grace`` seconds (default ``stop_timeout``) are cancelled;
        absurd retries them once their lease expires (``claim_timeout`` seconds after the claim
        or the last checkpoint).
        """
        slots, self._slots = self._slots, None
        if slots is None:
            return True
        try:
            return await slots.stop(self.stop_timeout if grace is None else grace)
        finally:
            await self._close_own_pool()

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()

    async def _close_own_pool(self) -> None:
        pool, self._own_pool = self._own_pool, None
        if pool is not None:
            await pool.close()
