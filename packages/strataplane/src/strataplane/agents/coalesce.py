"""Cache misses of many concurrent requests answered by one query.

When thousands of agents poll, misses come in bursts: a replica starts, a merge invalidates a
tenant, a TTL runs out. One transaction per miss would queue requests behind the connection
pool. ``Coalescer.load`` queues the key instead; one fetch at a time runs for every key queued
so far (up to ``batch``), so the number of queries follows the database's latency, not the
request rate. Concurrent loads of one key share its fetch.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Hashable, Mapping, Sequence
from typing import Any


class Coalescer[K: Hashable, V]:
    def __init__(
        self, fetch: Callable[[Sequence[K]], Awaitable[Mapping[K, V]]], batch: int = 2000
    ) -> None:
        self._fetch = fetch
        self._batch = batch
        self._waiting: dict[K, asyncio.Future[V | None]] = {}
        self._queued: list[K] = []
        self._task: asyncio.Task[None] | None = None
        self.fetches = 0

    async def load(self, key: K) -> V | None:
        """The value fetched for ``key`` (None when the fetch found none); raises what the
        fetch raised."""
        future = self._waiting.get(key)
        if future is None:
            future = asyncio.get_running_loop().create_future()
            self._waiting[key] = future
            self._queued.append(key)
            if self._task is None:
                self._task = asyncio.create_task(self._run())
        return await asyncio.shield(future)

    async def _run(self) -> None:
        try:
            await asyncio.sleep(0)  # let the requests of the current burst queue theirs
            while self._queued:
                keys, self._queued = self._queued[: self._batch], self._queued[self._batch :]
                self.fetches += 1
                try:
                    found = await self._fetch(keys)
                except Exception as exc:
                    for key in keys:
                        self._fail(key, exc)
                else:
                    for key in keys:
                        self._waiting.pop(key).set_result(found.get(key))
        except asyncio.CancelledError:  # shutting down: nobody fetches for the waiting loads
            for key in list(self._waiting):
                self._fail(key, RuntimeError("the fetch was cancelled"))
            self._queued.clear()
            raise
        finally:
            self._task = None

    def _fail(self, key: K, exc: Exception) -> None:
        future = self._waiting.pop(key)
        future.set_exception(exc)
        future.add_done_callback(_retrieved)  # no warning when every waiter went away


def _retrieved(future: asyncio.Future[Any]) -> None:
    future.exception()
