"""The ingester: copies what PostgreSQL records into ClickHouse, one tenant at a time, in batches
of ``analytics_batch`` rows every ``analytics_flush_s`` (data model §2.1: 10k rows or 1 s):
message events from ``events`` after each tenant's cursor (``history``), task events and usage
from the outbox (``outbox``).

Each pass: ``model_pricing`` copied when PostgreSQL's differs from the last copy (PostgreSQL
prices each usage record when it is stored, docs/decisions/0031; ClickHouse's copy lets cost
queries show the rates); the pass's mark and how far events may be read (``horizon``); the
tenants with queued rows or events to send; per tenant, its retention in ClickHouse's
``tenant_retention_source`` (rows take their ``retention_days`` from it at insert, so it is
written first), then its oldest rows, minus the ids ClickHouse already holds (a pass that died
after inserting and before deleting them or moving the cursor sends them again), inserted, then
deleted from the outbox or passed by the cursor. So a row reaches ClickHouse at least once and
is counted once. One leader per database runs it, in the process that owns the analytics store.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from platformkit.db.scope import Conn, Pool, tenant_transaction, transaction
from platformkit.jobs import LeaderLoop, LockKey, shard_keys

from agentbus.analytics import history, outbox
from agentbus.analytics.backends import Backend
from agentbus.analytics.horizon import Mark, safe_mark, uuid_floor
from agentbus.analytics.rows import event_row, split
from agentbus.db import SCOPE

log = logging.getLogger(__name__)
LOOP_NAME = "agentbus.analytics.ingest"
MARKS_KEPT = 3600  # an hour of passes at the default flush; older marks are dropped first


class Ingester:
    def __init__(self, pool: Pool, backend: Backend, *, batch: int = 10_000) -> None:
        self.pool, self.backend, self.batch = pool, backend, batch
        self._retention: dict[uuid.UUID, int] = {}
        self._pricing: list[dict[str, Any]] | None = None
        self._marks: list[Mark] = []

    async def run_once(self) -> int:
        """One pass over every tenant with queued rows or events to send; how many rows were
        taken."""
        async with transaction(self.pool) as conn:
            tenants = await outbox.tenants_with_rows(conn)
            pricing = await outbox.model_pricing(conn)
            before = await self._horizon(conn)
            with_events = [] if before is None else await history.tenants_with_events(conn, before)
        if pricing != self._pricing:
            await self.backend.insert("agentbus.model_pricing", pricing)
            self._pricing = pricing
        taken = 0
        for row in tenants:
            taken += await self.drain_tenant(row["tenant_id"])
        for row in with_events:
            assert before is not None
            taken += await self.drain_events(row["tenant_id"], row["after"], before)
        return taken

    async def _horizon(self, conn: Conn) -> uuid.UUID | None:
        """This pass's mark noted; the first event id no pass may read yet (None: none may)."""
        mark, oldest = await history.mark(conn)
        self._marks = [*self._marks[-(MARKS_KEPT - 1) :], mark]
        safe = safe_mark(self._marks, oldest)
        if safe is None:
            return None
        self._marks = [m for m in self._marks if m.next_xid >= safe.next_xid]
        return uuid_floor(safe.at)

    async def drain_events(self, tenant_id: uuid.UUID, after: uuid.UUID, before: uuid.UUID) -> int:
        """The tenant's events after ``after`` and below ``before``, in batches, the cursor moved
        after each."""
        await self._sync_retention(tenant_id)
        taken = 0
        while True:
            async with tenant_transaction(self.pool, SCOPE, tenant_id) as conn:
                rows = await history.take(conn, tenant_id, after, before, self.batch)
            if not rows:
                return taken
            events = await asyncio.to_thread(list, map(event_row, rows))
            await self._insert_new(tenant_id, "events", "event_id", "event_time", events)
            after = uuid.UUID(rows[-1]["event_id"])
            async with tenant_transaction(self.pool, SCOPE, tenant_id) as conn:
                await history.save_cursor(conn, tenant_id, after)
            taken += len(rows)
            if len(rows) < self.batch:
                return taken

    async def drain_tenant(self, tenant_id: uuid.UUID) -> int:
        await self._sync_retention(tenant_id)
        taken = 0
        while True:
            async with tenant_transaction(self.pool, SCOPE, tenant_id) as conn:
                rows = await outbox.take(conn, tenant_id, self.batch)
            if not rows:
                return taken
            batch = await asyncio.to_thread(split, rows)  # thousands of rows: off the loop
            await self._insert_new(tenant_id, "events", "event_id", "event_time", batch.events)
            await self._insert_new(tenant_id, "usage", "usage_id", "recorded_at", batch.usage)
            async with tenant_transaction(self.pool, SCOPE, tenant_id) as conn:
                await outbox.delete_through(conn, tenant_id, batch.last_seq)
            taken += len(rows)
            if len(rows) < self.batch:
                return taken

    async def _insert_new(
        self, tenant_id: uuid.UUID, table: str, key: str, at: str, rows: Sequence[dict[str, Any]]
    ) -> None:
        if not rows:
            return
        times = [r[at] for r in rows]
        held = await self.backend.select(
            f"""SELECT toString({key}) AS id FROM agentbus.{table}
                 WHERE tenant_id = {{t:UUID}} AND {at} BETWEEN {{lo:DateTime64(3, 'UTC')}}
                   AND {{hi:DateTime64(3, 'UTC')}} AND {key} IN {{ids:Array(UUID)}}""",
            {"t": str(tenant_id), "lo": min(times), "hi": max(times),
             "ids": [str(r[key]) for r in rows]},
        )  # fmt: skip
        present = {h["id"] for h in held}
        fresh = [r for r in rows if str(r[key]) not in present]
        await self.backend.insert(f"agentbus.{table}", fresh)

    async def _sync_retention(self, tenant_id: uuid.UUID) -> None:
        async with tenant_transaction(self.pool, SCOPE, tenant_id) as conn:
            days = await outbox.retention_days(conn, tenant_id)
        if self._retention.get(tenant_id) == days:
            return
        now = datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]
        await self.backend.insert(
            "agentbus.tenant_retention_source",
            [{"tenant_id": str(tenant_id), "retention_days": days, "updated_at": now}],
        )
        await self.backend.command("SYSTEM RELOAD DICTIONARY agentbus.tenant_retention")
        self._retention[tenant_id] = days


def ingest_loop(pool: Pool, backend: Backend, interval_s: float, batch: int) -> LeaderLoop:
    ingester = Ingester(pool, backend, batch=batch)

    async def body(_key: LockKey) -> None:
        try:
            await ingester.run_once()
        except Exception:  # ClickHouse away: the rows stay queued for the next pass
            log.exception("analytics ingest pass failed; the outbox keeps its rows")

    return LeaderLoop(pool, shard_keys(LOOP_NAME, 1), interval_s, body)
