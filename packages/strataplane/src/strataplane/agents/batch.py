"""Batched writes of the agent endpoints: polls mark agents seen, GETs record what was
served, heartbeats carry reports. All are queued in memory and written every ``interval``
seconds, one transaction per tenant, a few statements per batch however many agents
reported. A crash loses at most one interval of reports, which the next heartbeat repeats."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from uuid import UUID

import psycopg
from platformkit.db.scope import Conn, Pool, tenant_transaction

from strataplane.agents.heartbeat import Heartbeat, fold
from strataplane.db import SCOPE
from strataplane.store import fleet_notify, fleet_reports, fleet_serving

log = logging.getLogger(__name__)

type Hook = Callable[[Conn, UUID, list[UUID]], Awaitable[None]]


class Batcher:
    def __init__(self, pool: Pool, interval: float, *, relabel: Hook, rerender: Hook) -> None:
        self._pool = pool
        self._interval = interval
        self._relabel, self._rerender = relabel, rerender
        self._seen: dict[UUID, tuple[UUID, datetime, str | None]] = {}
        self._beats: dict[UUID, tuple[UUID, Heartbeat]] = {}
        self._served: dict[UUID, tuple[UUID, bytes, datetime]] = {}
        self._task: asyncio.Task[None] | None = None
        self.flushed = 0

    def seen(self, tenant_id: UUID, agent_id: UUID, ip: str | None) -> None:
        self._seen[agent_id] = (tenant_id, datetime.now(UTC), ip)

    def served(self, tenant_id: UUID, agent_id: UUID, artifact: bytes) -> None:
        self._served[agent_id] = (tenant_id, artifact, datetime.now(UTC))

    def heartbeat(self, tenant_id: UUID, hb: Heartbeat, ip: str | None) -> None:
        self.seen(tenant_id, hb.agent_id, ip)
        queued = self._beats.get(hb.agent_id)
        if queued is not None:  # keep every log line, the latest of everything else
            hb.logs = [*queued[1].logs, *hb.logs][-fleet_reports.LOGS_KEPT :]
        self._beats[hb.agent_id] = (tenant_id, hb)

    async def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="fleet-batcher")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        await self.flush()

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self._interval)
            try:
                await self.flush()
            except Exception:
                log.exception("fleet batch write failed")

    async def flush(self) -> None:
        seen, self._seen = self._seen, {}
        beats, self._beats = self._beats, {}
        served, self._served = self._served, {}
        tenants = {t for t, _ts, _ip in seen.values()} | {t for t, _hb in beats.values()}
        for tenant_id in tenants | {t for t, _a, _ts in served.values()}:
            mine_seen = [(a, ts, ip) for a, (t, ts, ip) in seen.items() if t == tenant_id]
            mine_beats = [hb for t, hb in beats.values() if t == tenant_id]
            mine_served = [(a, art, ts) for a, (t, art, ts) in served.items() if t == tenant_id]
            for attempt in range(2):  # a deadlock victim is retried once
                try:
                    async with tenant_transaction(self._pool, SCOPE, tenant_id) as conn:
                        ids = {a for a, _ts, _ip in mine_seen} | {a for a, _r, _t in mine_served}
                        await fleet_serving.lock_agents(conn, tenant_id, list(ids))
                        await self._write_served(conn, tenant_id, mine_served)
                        await self._write(conn, tenant_id, mine_seen, mine_beats)
                    break
                except psycopg.errors.DeadlockDetected:
                    if attempt:
                        log.exception("fleet batch write for tenant %s failed", tenant_id)
                except Exception:
                    log.exception("fleet batch write for tenant %s failed", tenant_id)
                    break
            self.flushed += len(mine_seen)

    async def _write_served(
        self, conn: Conn, tenant_id: UUID, served: list[tuple[UUID, bytes, datetime]]
    ) -> None:
        if not served:
            return
        recorded = await fleet_serving.mark_served(conn, tenant_id, served)
        by_artifact: dict[bytes, list[UUID]] = {}
        for agent_id, artifact in recorded:
            by_artifact.setdefault(artifact, []).append(agent_id)
        for artifact, agents in by_artifact.items():
            await fleet_notify.served(conn, tenant_id, artifact, agents)

    async def _write(
        self,
        conn: Conn,
        tenant_id: UUID,
        seen: list[tuple[UUID, datetime, str | None]],
        beats: list[Heartbeat],
    ) -> None:
        moved = await fleet_serving.touch_seen(conn, tenant_id, seen) if seen else []
        if moved:
            await self._relabel(conn, tenant_id, moved)
        if not beats:
            return
        rows = {
            r.id: r
            for r in await fleet_reports.current_rows(
                conn, tenant_id, [hb.agent_id for hb in beats]
            )
        }
        candidates = {
            hb.reported_hash for hb in beats if hb.reported_hash is not None and hb.agent_id in rows
        }
        known = await fleet_reports.known_artifacts(conn, tenant_id, sorted(candidates))
        updates, events, logs, upgraded = [], [], [], []
        for hb in beats:
            row = rows.get(hb.agent_id)
            if row is None:
                continue  # forgotten meanwhile
            update, transitions = fold(row, hb, known)
            updates.append(update)
            events += transitions
            logs += hb.logs
            if hb.version is not None and hb.version != row.version:
                upgraded.append(hb.agent_id)
        await fleet_reports.write_reports(conn, tenant_id, updates)
        await fleet_reports.insert_events(conn, tenant_id, events)
        await fleet_reports.insert_logs(conn, tenant_id, logs)
        if upgraded:
            await self._rerender(conn, tenant_id, upgraded)
            for agent_id in upgraded:
                await fleet_notify.agent_changed(conn, tenant_id, agent_id)
