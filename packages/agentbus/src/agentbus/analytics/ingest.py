"""The ingester: drains the PostgreSQL outbox into ClickHouse, one tenant at a time, in batches
of ``analytics_batch`` rows every ``analytics_flush_s`` (data model §2.1: 10k rows or 1 s).

Each pass: ``model_pricing`` copied when PostgreSQL's differs from the last copy (PostgreSQL
prices each usage record when it is stored, docs/decisions/0031; ClickHouse's copy lets cost
queries show the rates); the tenants with queued rows; per tenant, its retention in ClickHouse's
``tenant_retention_source`` (rows take their ``retention_days`` from it at insert, so it is
written first), then its oldest rows, minus the ids ClickHouse already holds (a pass that died
after inserting and before deleting sends them again), inserted, then deleted from the outbox.
So a row reaches ClickHouse at least once and is counted once. One leader per database runs it,
in the process that owns the analytics store.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from platformkit.db.scope import Pool, tenant_transaction, transaction
from platformkit.jobs import LeaderLoop, LockKey, shard_keys

from agentbus.analytics import outbox
from agentbus.analytics.backends import Backend
from agentbus.analytics.rows import split
from agentbus.db import SCOPE

log = logging.getLogger(__name__)
LOOP_NAME = "agentbus.analytics.ingest"


class Ingester:
    def __init__(self, pool: Pool, backend: Backend, *, batch: int = 10_000) -> None:
        self.pool, self.backend, self.batch = pool, backend, batch
        self._retention: dict[uuid.UUID, int] = {}
        self._pricing: list[dict[str, Any]] | None = None

    async def run_once(self) -> int:
        """One pass over every tenant with queued rows; how many rows were taken."""
        async with transaction(self.pool) as conn:
            tenants = await outbox.tenants_with_rows(conn)
            pricing = await outbox.model_pricing(conn)
        if pricing != self._pricing:
            await self.backend.insert("agentbus.model_pricing", pricing)
            self._pricing = pricing
        taken = 0
        for row in tenants:
            taken += await self.drain_tenant(row["tenant_id"])
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
