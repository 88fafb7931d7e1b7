"""Job ``partitions.create`` (data model §1.11): monthly ``messages`` partitions, 3 months ahead.

The work is the ``ensure_message_partitions(months_ahead, from_time)`` database function
(migration 0003): it runs as the owner, creates only what is missing under an advisory lock, and
returns the names it created, so calling it again, or from two places at once, is harmless.
The gateway runs it daily on one replica through ``partitions_loop``; operators can run it by
hand with ``agentbus-gateway partitions ensure``.
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any

from platformkit.db.scope import Pool, transaction
from platformkit.jobs import LeaderLoop, LockKey, shard_keys
from psycopg import AsyncConnection
from psycopg.rows import scalar_row

log = logging.getLogger(__name__)

LOOP_NAME = "agentbus.partitions.create"
DAILY = 24 * 3600.0
MONTHS_AHEAD = 3


async def ensure_partitions(
    conn: AsyncConnection[Any],
    *,
    months_ahead: int = MONTHS_AHEAD,
    from_time: datetime | None = None,
) -> list[str]:
    """Create the partitions of ``from_time``'s month (default: now) and ``months_ahead`` more
    that do not exist yet; return the names created (empty when all exist)."""
    async with conn.cursor(row_factory=scalar_row) as cur:
        if from_time is None:
            await cur.execute("SELECT ensure_message_partitions(%s)", (months_ahead,))
        else:
            await cur.execute("SELECT ensure_message_partitions(%s, %s)", (months_ahead, from_time))
        return [str(name) for name in await cur.fetchall()]


async def existing_partitions(conn: AsyncConnection[Any]) -> list[str]:
    """Names of the current partitions of ``messages``, oldest first."""
    async with conn.cursor(row_factory=scalar_row) as cur:
        await cur.execute(
            """SELECT c.relname::text FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
               WHERE i.inhparent = 'public.messages'::regclass ORDER BY c.relname"""
        )
        return [str(name) for name in await cur.fetchall()]


def partitions_loop(
    pool: Pool, *, months_ahead: int = MONTHS_AHEAD, interval: float = DAILY
) -> LeaderLoop:
    """A leader loop that runs the job on one replica, at start and then every ``interval``."""

    async def body(_key: LockKey) -> None:
        async with transaction(pool) as conn:
            created = await ensure_partitions(conn, months_ahead=months_ahead)
        if created:
            log.info("created messages partitions %s", ", ".join(created))

    return LeaderLoop(pool, shard_keys(LOOP_NAME, 1), interval, body)
