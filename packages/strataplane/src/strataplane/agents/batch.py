"""Batched writes of the agent endpoints: polls mark agents seen, GETs record what was
served, heartbeats and quiet Elastic Agent check-ins carry reports. All are queued in memory
and written every ``interval`` seconds, one transaction per tenant, a few statements per batch
however many agents reported. A batch that meets a deadlock twice, a lost connection or a
busy pool goes back to the queues and is written with the next one; a crash loses at most one
interval of reports, which the next heartbeat (or check-in) repeats.

Items are checked before they are queued (agents/heartbeat.py), so a statement should never
fail on what an agent sent; if one does, the tenant's batch is written again one agent at a
time, so that the one bad item is dropped (and logged) and every other agent's report lands."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from uuid import UUID

import psycopg
from platformkit.db.scope import Conn, Pool, tenant_transaction

from strataplane.agents.elastic_batch import write_checkins
from strataplane.agents.elastic_report import CheckinReport
from strataplane.agents.heartbeat import Heartbeat, fold
from strataplane.db import SCOPE
from strataplane.store import fleet_notify, fleet_reports, fleet_serving

log = logging.getLogger(__name__)

type Hook = Callable[[Conn, UUID, list[UUID]], Awaitable[None]]


@dataclass
class _Batch:
    """One tenant's share of a flush."""

    seen: list[tuple[UUID, datetime, str | None]] = field(default_factory=list)
    beats: list[Heartbeat] = field(default_factory=list)
    served: list[tuple[UUID, bytes, datetime]] = field(default_factory=list)
    checkins: list[CheckinReport] = field(default_factory=list)


def _per_agent(batch: _Batch) -> dict[UUID, _Batch]:
    """``batch`` split into one batch per agent."""
    split: dict[UUID, _Batch] = {}
    for seen in batch.seen:
        split.setdefault(seen[0], _Batch()).seen.append(seen)
    for hb in batch.beats:
        split.setdefault(hb.agent_id, _Batch()).beats.append(hb)
    for served in batch.served:
        split.setdefault(served[0], _Batch()).served.append(served)
    for report in batch.checkins:
        split.setdefault(report.agent_id, _Batch()).checkins.append(report)
    return split


class Batcher:
    def __init__(self, pool: Pool, interval: float, *, relabel: Hook, rerender: Hook) -> None:
        self._pool = pool
        self._interval = interval
        self._relabel, self._rerender = relabel, rerender
        self._seen: dict[UUID, tuple[UUID, datetime, str | None]] = {}
        self._beats: dict[UUID, tuple[UUID, Heartbeat]] = {}
        self._served: dict[UUID, tuple[UUID, bytes, datetime]] = {}
        self._checkins: dict[UUID, tuple[UUID, CheckinReport]] = {}
        self._task: asyncio.Task[None] | None = None
        # One flush at a time: a flush asked for (a test, stop) returns only once what was
        # queued before it is written, even when the periodic flush had taken it first.
        self._lock = asyncio.Lock()

    def seen(self, tenant_id: UUID, agent_id: UUID, ip: str | None) -> None:
        self._seen[agent_id] = (tenant_id, datetime.now(UTC), ip)

    def served(self, tenant_id: UUID, agent_id: UUID, artifact: bytes) -> None:
        self._served[agent_id] = (tenant_id, artifact, datetime.now(UTC))

    def checkin(self, tenant_id: UUID, report: CheckinReport, ip: str | None) -> None:
        """A quiet Elastic Agent check-in (agents/elastic_quiet.py); the latest one of an agent
        is written."""
        self._seen[report.agent_id] = (tenant_id, report.at, ip)
        self._checkins[report.agent_id] = (tenant_id, report)

    def heartbeat(self, tenant_id: UUID, hb: Heartbeat, ip: str | None) -> None:
        self.seen(tenant_id, hb.agent_id, ip)
        queued = self._beats.get(hb.agent_id)
        if queued is not None:  # keep every log line, the latest of everything else
            hb.logs = [*queued[1].logs, *hb.logs][-fleet_reports.LOGS_KEPT :]
            hb.reload_error = hb.reload_error or queued[1].reload_error
        self._beats[hb.agent_id] = (tenant_id, hb)

    async def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="fleet-batcher")

    async def stop(self) -> None:
        if self._task is not None:
            async with self._lock:  # never cancel a batch half written: it would be lost
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
        async with self._lock:
            await self._flush()

    async def _flush(self) -> None:
        seen, self._seen = self._seen, {}
        beats, self._beats = self._beats, {}
        served, self._served = self._served, {}
        checkins, self._checkins = self._checkins, {}
        batches: dict[UUID, _Batch] = {}
        for agent_id, (tenant_id, ts, ip) in seen.items():
            batches.setdefault(tenant_id, _Batch()).seen.append((agent_id, ts, ip))
        for tenant_id, hb in beats.values():
            batches.setdefault(tenant_id, _Batch()).beats.append(hb)
        for agent_id, (tenant_id, artifact, ts) in served.items():
            batches.setdefault(tenant_id, _Batch()).served.append((agent_id, artifact, ts))
        for tenant_id, report in checkins.values():
            batches.setdefault(tenant_id, _Batch()).checkins.append(report)
        for tenant_id, batch in batches.items():
            if not await self._write_batch(tenant_id, batch):
                for agent_id, item in _per_agent(batch).items():  # isolate the failing item
                    if not await self._write_batch(tenant_id, item):
                        log.error("fleet report of agent %s/%s dropped", tenant_id, agent_id)

    async def _write_batch(self, tenant_id: UUID, batch: _Batch) -> bool:
        """Write ``batch``; False when a statement failed on its content (requeued batches
        count as handled)."""
        for attempt in range(2):  # a deadlock victim is retried at once
            try:
                await self._commit(tenant_id, batch)
                return True
            except psycopg.errors.DeadlockDetected:
                if attempt:
                    log.exception("fleet batch write for tenant %s failed", tenant_id)
                    self._requeue(tenant_id, batch)
            except psycopg.OperationalError:  # the database is away or busy: next flush
                log.exception("fleet batch write for tenant %s failed", tenant_id)
                self._requeue(tenant_id, batch)
                return True
            except Exception:  # the content: retrying the same batch would fail the same way
                log.exception("fleet batch write for tenant %s failed", tenant_id)
                return False
        return True

    async def _commit(self, tenant_id: UUID, batch: _Batch) -> None:
        async with tenant_transaction(self._pool, SCOPE, tenant_id) as conn:
            ids = {a for a, _ts, _ip in batch.seen} | {a for a, _r, _t in batch.served}
            await fleet_serving.lock_agents(conn, tenant_id, list(ids))
            # before the seen times move: a report older than the last check-in is skipped
            await write_checkins(conn, tenant_id, batch.checkins)
            await self._write_served(conn, tenant_id, batch.served)
            await self._write(conn, tenant_id, batch.seen, batch.beats)

    def _requeue(self, tenant_id: UUID, batch: _Batch) -> None:
        """A failed batch goes back to the queues for the next flush; what arrived meanwhile
        is newer and wins, except that no log line is lost."""
        for agent_id, ts, ip in batch.seen:
            self._seen.setdefault(agent_id, (tenant_id, ts, ip))
        for agent_id, artifact, ts in batch.served:
            self._served.setdefault(agent_id, (tenant_id, artifact, ts))
        for report in batch.checkins:
            self._checkins.setdefault(report.agent_id, (tenant_id, report))
        for hb in batch.beats:
            newer = self._beats.get(hb.agent_id)
            if newer is None:
                self._beats[hb.agent_id] = (tenant_id, hb)
            else:
                newer[1].logs = [*hb.logs, *newer[1].logs][-fleet_reports.LOGS_KEPT :]

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
