"""Deletes expired tasks and events, per project, under an advisory lock held by one replica.

Find and act: for each project, its retention (``z4j.domain.retention``) gives two cutoffs;
expired events, then expired tasks (with their remaining events), are deleted a batch of at
most ``batch_rows`` rows per statement, each batch its own short transaction followed by a
short pause, so ingest keeps its pace. A pass stops a project after ``max_batches`` batches
and moves on; what is left is its backlog, recorded with the rows deleted in
``project_retention`` and logged. A pass is idempotent (deleting what is expired twice
deletes nothing the second time), and ``pg_try_advisory_lock`` on a connection of its own
lets one replica run it at a time: the others skip the pass.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from z4j.brain import Brain
from z4j.domain.retention import Retention, of_settings
from z4j.store import retention as store

log = logging.getLogger("z4j.retention")

# pg_advisory_lock(bigint): "z4j retn" as a number, distinct from every other lock of the brain
LOCK_KEY = int.from_bytes(b"z4jretn", "big")


@dataclass(slots=True)
class ProjectPurge:
    project_id: uuid.UUID
    tasks: int = 0
    events: int = 0
    backlog: int = 0
    statements: list[int] = field(default_factory=list)  # rows deleted by each statement


@dataclass(slots=True)
class Pass:
    ran: bool  # False: another replica holds the lock
    projects: list[ProjectPurge] = field(default_factory=list)


async def purge_once(
    brain: Brain,
    *,
    batch_rows: int | None = None,
    pause: float | None = None,
    max_batches: int = 200,
    now: datetime | None = None,
) -> Pass:
    """One pass over every project, if no other replica is running one."""
    batch_rows = batch_rows or brain.settings.retention_batch_rows
    pause = brain.settings.retention_batch_pause_seconds if pause is None else pause
    async with brain.pool.connection() as lock_conn:
        await lock_conn.set_autocommit(True)
        try:
            cur = await lock_conn.execute("SELECT pg_try_advisory_lock(%s) AS held", (LOCK_KEY,))
            row = await cur.fetchone()
            if not (row and row["held"]):
                return Pass(ran=False)
            try:
                return await _pass(brain, batch_rows, pause, max_batches, now)
            finally:
                await lock_conn.execute("SELECT pg_advisory_unlock(%s)", (LOCK_KEY,))
        finally:
            await lock_conn.set_autocommit(False)


async def _pass(
    brain: Brain, batch_rows: int, pause: float, max_batches: int, now: datetime | None
) -> Pass:
    async with brain.platform_tx() as conn:
        projects = await store.projects(conn)
    done = Pass(ran=True)
    for project_id, settings in projects:
        result = await _purge_project(
            brain, project_id, of_settings(settings), batch_rows, pause, max_batches,
            now or datetime.now(UTC),
        )  # fmt: skip
        done.projects.append(result)
        if result.tasks or result.events or result.backlog:
            log.info(
                "retention: project %s deleted %d tasks and %d events in %d statements;"
                " backlog %d", project_id, result.tasks, result.events, len(result.statements),
                result.backlog,
            )  # fmt: skip
    return done


async def _purge_project(
    brain: Brain,
    project_id: uuid.UUID,
    retention: Retention,
    batch_rows: int,
    pause: float,
    max_batches: int,
    now: datetime,
) -> ProjectPurge:
    events_before = now - timedelta(days=retention.event_days)
    tasks_before = now - timedelta(days=retention.task_days)
    result = ProjectPurge(project_id)
    for kind in ("events", "tasks"):
        while len(result.statements) < max_batches:
            async with brain.platform_tx() as conn:
                if kind == "events":
                    n = await store.delete_events(conn, project_id, events_before, batch_rows)
                    result.events += n
                else:
                    n, cascaded = await store.delete_tasks(
                        conn, project_id, tasks_before, batch_rows
                    )
                    result.tasks += n
                    result.events += cascaded
            result.statements.append(n)
            if n < batch_rows:
                break
            await asyncio.sleep(pause)
    async with brain.platform_tx() as conn:
        result.backlog = await store.backlog(conn, project_id, tasks_before, events_before)
        await store.record_run(conn, project_id, result.tasks, result.events, result.backlog)
    return result


async def _loop(brain: Brain) -> None:
    while True:  # the first pass an interval after start, when the brain has settled
        await asyncio.sleep(brain.settings.retention_interval_seconds)
        try:
            await purge_once(brain)
        except Exception:
            log.exception("retention pass failed")


@contextlib.asynccontextmanager
async def run_retention(brain: Brain) -> AsyncIterator[None]:
    task = asyncio.create_task(_loop(brain))
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
