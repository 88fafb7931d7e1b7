"""``messages.expire`` and ``dlq.sweep`` (05-DELIVERY-SEMANTICS.md §8, §7.1, §12).

Find, per tenant of the shard (``platform_tenants()``; each query in that tenant's scope under
RLS): undelivered messages past ``expires_at`` (or within a day of retention without one), and
messages still ``fetched`` after MaxDeliver attempts with no fetch for 60 s (the backstop of the
advisory worker). Act per row: lock, re-check through the conditional status update, change,
and for expiries delete the stream copy by sequence (best effort; ``Nats-TTL`` usually did).
Both are safe to repeat; one leader per shard runs them.
"""

from __future__ import annotations

import contextlib
import logging
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from platformkit.db.scope import Pool, tenant_transaction, transaction
from platformkit.jobs import LeaderLoop, LockKey, shard_keys

from agentbus.broker import Broker, stream_name
from agentbus.db import SCOPE
from agentbus.delivery import finds, notices, outcomes, store
from agentbus.delivery.domain import DLQ_SWEEP_IDLE_S, MAX_DELIVER, MAX_DELIVERIES
from agentbus.delivery.notices import Notes

log = logging.getLogger(__name__)

Row = dict[str, Any]
BATCH = 1000
EXPIRE_LOOP = "agentbus.messages.expire"
DLQ_LOOP = "agentbus.dlq.sweep"
EVERY_S = 60.0


async def shard_tenants(pool: Pool, shard: int, shards: int) -> list[uuid.UUID]:
    """Tenants whose id falls in ``shard`` (of ``shards``), deleted ones excluded."""
    async with transaction(pool) as conn:
        cur = await conn.execute("SELECT id FROM platform_tenants() WHERE status <> 'deleted'")
        rows = await cur.fetchall()
    return [r["id"] for r in rows if r["id"].int % shards == shard]


class Sweeper:
    def __init__(self, pool: Pool, broker: Broker | None, *, shards: int = 1) -> None:
        self.pool, self.broker, self.shards = pool, broker, shards

    async def expire_once(self, shard: int = 0) -> int:
        """One pass of ``messages.expire``; how many messages it expired."""
        return await self._pass(shard, self._find_expiries, self._expire)

    async def dead_letter_once(self, shard: int = 0) -> int:
        """One pass of ``dlq.sweep``; how many messages it dead-lettered."""
        return await self._pass(shard, self._find_dead_letters, self._dead_letter)

    async def _pass(
        self,
        shard: int,
        find: Callable[[Any, uuid.UUID], Awaitable[list[Row]]],
        act: Callable[[uuid.UUID, Row], Awaitable[bool]],
    ) -> int:
        done = 0
        for tenant_id in await shard_tenants(self.pool, shard, self.shards):
            async with tenant_transaction(self.pool, SCOPE, tenant_id) as conn:
                rows = await find(conn, tenant_id)
            for row in rows:
                try:
                    done += await act(tenant_id, row)
                except Exception:
                    log.exception("sweeping %s of tenant %s failed", row["id"], tenant_id)
        return done

    async def _find_expiries(self, conn: Any, tenant_id: uuid.UUID) -> list[Row]:
        return await finds.due_expiries(conn, tenant_id, BATCH)

    async def _find_dead_letters(self, conn: Any, tenant_id: uuid.UUID) -> list[Row]:
        return await finds.due_dead_letters(
            conn, tenant_id, max_deliver=MAX_DELIVER, idle_s=DLQ_SWEEP_IDLE_S, limit=BATCH
        )

    async def _expire(self, tenant_id: uuid.UUID, found: Row) -> bool:
        notes: Notes = []
        async with tenant_transaction(self.pool, SCOPE, tenant_id) as conn:
            row = await store.lock_any(conn, tenant_id, found["id"], found["accepted_at"])
            if row is None or row["status"] not in ("accepted", "fetched"):
                return False  # delivered meanwhile: in the sidecar's custody, expiry is its call
            if not await outcomes.expire(conn, tenant_id, row, notes):
                return False
        await self._notify(notes)
        if row["stream_seq"] is not None and self.broker is not None and self.broker.connected:
            with contextlib.suppress(Exception):  # gone already (TTL), or NATS away: harmless
                await self.broker.js.delete_msg(stream_name(tenant_id), row["stream_seq"])
        return True

    async def _dead_letter(self, tenant_id: uuid.UUID, found: Row) -> bool:
        notes: Notes = []
        async with tenant_transaction(self.pool, SCOPE, tenant_id) as conn:
            row = await store.lock_any(conn, tenant_id, found["id"], found["accepted_at"])
            if row is None or row["status"] != "fetched":
                return False
            done = await outcomes.dead_letter(conn, tenant_id, row, MAX_DELIVERIES, notes)
        await self._notify(notes)
        return done

    async def _notify(self, notes: Notes) -> None:
        if self.broker is not None:
            await notices.publish(self.broker, notes)


def sweeper_loops(
    pool: Pool, broker: Broker | None, *, shards: int = 1, interval: float = EVERY_S
) -> list[LeaderLoop]:
    sweeper = Sweeper(pool, broker, shards=shards)

    async def expire(key: LockKey) -> None:
        await sweeper.expire_once(key[1])

    async def dead_letter(key: LockKey) -> None:
        await sweeper.dead_letter_once(key[1])

    return [
        LeaderLoop(pool, shard_keys(EXPIRE_LOOP, shards), interval, expire),
        LeaderLoop(pool, shard_keys(DLQ_LOOP, shards), interval, dead_letter),
    ]
