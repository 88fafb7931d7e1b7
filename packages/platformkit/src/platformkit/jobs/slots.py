"""Worker slots: the loops that claim one queue's tasks and run them, at most one per slot.

Each slot borrows a pool connection, claims one task through absurd's SDK
(``AsyncAbsurd.work_batch``), runs its handler (whose checkpointed steps, sleeps and events
write through that connection), records the result or the failure, and gives the connection
back. A failure is retried by absurd with the task's retry strategy; a run whose worker vanished
is failed when its lease (``claim_timeout``) expires, and then retried the same way.

Slot 0 polls every ``poll_interval``; the other idle slots wait for a sibling to find work (or
``poll_interval * concurrency``), so an idle queue costs under two claim queries per interval
while a burst is picked up by every slot at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from absurd_sdk import AsyncAbsurd, ClaimedTask
from psycopg import AsyncConnection

from platformkit.db.scope import Pool
from platformkit.jobs.tasks import Task

log = logging.getLogger(__name__)


class _SlotClient(AsyncAbsurd):
    """The SDK client for one claim; reports how many tasks the claim returned."""

    def __init__(self, conn: AsyncConnection[Any], queue: str, on_claim: Callable[[int], None]):
        super().__init__(conn, queue_name=queue)
        self._on_claim = on_claim

    async def claim_tasks(
        self, batch_size: int = 1, claim_timeout: int = 120, worker_id: str = "worker"
    ) -> list[ClaimedTask]:
        tasks = await super().claim_tasks(batch_size, claim_timeout, worker_id)
        self._on_claim(len(tasks))
        return tasks


@dataclass
class Slots:
    """``concurrency`` slot loops over ``queue``, started once and stopped once."""

    pool: Pool
    queue: str
    tasks: Mapping[str, Task]
    concurrency: int
    poll_interval: float
    claim_timeout: int
    worker_id: str
    in_flight: int = field(default=0, init=False)
    _loops: list[asyncio.Task[None]] = field(default_factory=list, init=False)
    _stopping: bool = field(default=False, init=False)
    _wake: asyncio.Event = field(default_factory=asyncio.Event, init=False)

    def start(self) -> None:
        self._loops = [
            asyncio.create_task(self._slot(i), name=f"jobs:{self.queue}:{i}")
            for i in range(self.concurrency)
        ]

    async def stop(self, grace: float) -> bool:
        """Stop claiming, wait up to ``grace`` seconds, cancel the rest; True if none was."""
        self._stopping = True
        self._wake.set()
        _done, pending = await asyncio.wait(self._loops, timeout=grace)
        for loop in pending:
            loop.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        if pending:
            log.warning("jobs %s: %d task(s) cancelled at stop", self.queue, len(pending))
        return not pending

    async def _work_one(self, worker: str) -> int:
        claimed = 0

        def on_claim(count: int) -> None:
            nonlocal claimed
            claimed = count
            self.in_flight += count

        try:
            async with self.pool.connection() as conn:
                client = _SlotClient(conn, self.queue, on_claim)
                for task in self.tasks.values():
                    client.register_task(
                        task.name,
                        default_max_attempts=task.max_attempts,
                        default_cancellation=task.cancellation,
                    )(task.handler)
                await client.work_batch(worker, self.claim_timeout, batch_size=1)
        finally:
            self.in_flight -= claimed
        return claimed

    async def _slot(self, index: int) -> None:
        worker, failures = f"{self.worker_id}:{index}", 0
        while not self._stopping:
            try:
                claimed = await self._work_one(worker)
                failures = 0
            except Exception:
                # The database went away or a connection broke: back off, keep the slot alive.
                failures += 1
                log.exception("jobs %s: slot %d failed (%d in a row)", self.queue, index, failures)
                await self._idle(min(self.poll_interval * 2**failures, 30.0))
                continue
            if claimed:
                self._wake.set()  # there may be more: let idle siblings claim too
            else:
                await self._idle(self.poll_interval * (1 if index == 0 else self.concurrency))

    async def _idle(self, seconds: float) -> None:
        if self._stopping:
            return
        # No await between the check above and this clear, so stop()'s wake cannot be lost.
        self._wake.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._wake.wait(), seconds)
