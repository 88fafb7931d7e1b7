"""Relays change notifications from PostgreSQL to the live dashboard streams of this process."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator

import psycopg

from z4j.brain import CHANGES_CHANNEL, Brain

log = logging.getLogger("z4j.changes")


async def _listen(brain: Brain, conninfo: str) -> None:
    reconnecting = False
    while True:
        try:
            async with await psycopg.AsyncConnection.connect(conninfo, autocommit=True) as conn:
                await conn.execute(f"LISTEN {CHANGES_CHANNEL}")
                if reconnecting:
                    await brain.wake_streams()  # whatever changed while we were away
                async for _notice in conn.notifies():
                    await brain.wake_streams()
        except psycopg.Error:
            log.warning("change listener lost its connection; reconnecting", exc_info=True)
            reconnecting = True
            await asyncio.sleep(1)


@contextlib.asynccontextmanager
async def relay_changes(brain: Brain, conninfo: str) -> AsyncIterator[None]:
    """Listen on a connection of its own (a pooled one would be handed to others)."""
    task = asyncio.create_task(_listen(brain, conninfo))
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
