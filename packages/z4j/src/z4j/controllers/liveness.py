"""Marks agents offline when they stop reporting: a leader-per-database sweeper."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator

from z4j.brain import Brain
from z4j.store import agents as agent_store

log = logging.getLogger("z4j.liveness")


async def sweep_once(brain: Brain) -> int:
    async with brain.platform_tx() as conn:
        changed = await agent_store.mark_stale_offline(conn, brain.settings.offline_after_seconds)
    if changed:
        await brain.notify_change()
    return changed


async def _loop(brain: Brain, interval: float) -> None:
    while True:
        try:
            await sweep_once(brain)
        except Exception:
            log.exception("liveness sweep failed")
        await asyncio.sleep(interval)


@contextlib.asynccontextmanager
async def run_liveness_sweeper(brain: Brain, interval: float = 5.0) -> AsyncIterator[None]:
    # The sweep is idempotent, so every replica may run it; no leader is needed for correctness.
    task = asyncio.create_task(_loop(brain, interval))
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
