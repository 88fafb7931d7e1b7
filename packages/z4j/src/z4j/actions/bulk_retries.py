"""Bulk retry: retry every task the task list's filters match, up to a maximum.

Without a state filter it takes the retriable states (failed and lost, ``domain.taskstate``):
retrying tasks still running or already done by accident would run them twice.
``preview`` counts the matches (the dashboard and the API show the count before anything
runs). ``start`` takes the matching task ids at that moment (newest first, at most ``max``),
stores them in a ``bulk_retries`` row with one ``task.bulk_retry`` audit entry, and leaves the
rest to ``z4j.controllers.bulk_retries``, which issues ``retry_task`` commands a window at a
time and carries on after a brain restart. Progress is the count of its commands by status.
"""

from __future__ import annotations

import uuid
from dataclasses import asdict, replace
from typing import Any

from platformkit.db.scope import Conn

from z4j.actions import audit
from z4j.actions.access import project_scope
from z4j.actions.context import Ctx
from z4j.actions.errors import BulkRetryNotFound, InvalidInput
from z4j.actions.tasks import checked_filters
from z4j.domain.roles import Permission
from z4j.domain.taskstate import retriable_states
from z4j.store import bulk_retries as bulk_store
from z4j.store import tasks_read
from z4j.store.tasks_read import Cursor, TaskFilters

MAX_BULK = 1000
PAGE = 200


def _bulk_filters(filters: TaskFilters) -> TaskFilters:
    checked = checked_filters(filters)
    return checked if checked.states else replace(checked, states=retriable_states())


def _check_max(maximum: int) -> int:
    if not 1 <= maximum <= MAX_BULK:
        raise InvalidInput(f"max is between 1 and {MAX_BULK}.", field="max")
    return maximum


async def _matching(
    conn: Conn, project_id: uuid.UUID, filters: TaskFilters, limit: int
) -> list[uuid.UUID]:
    """Ids of the tasks the filters match, newest first, at most ``limit``."""
    ids: list[uuid.UUID] = []
    cursor: Cursor | None = None
    while len(ids) < limit:
        page = await tasks_read.list_page(conn, project_id, filters, cursor, min(PAGE, limit))
        ids.extend(row["id"] for row in page.items)
        if page.older is None:
            break
        cursor = page.older
    return ids[:limit]


async def preview(
    ctx: Ctx, project_id: uuid.UUID, filters: TaskFilters, maximum: int
) -> dict[str, Any]:
    """How many tasks a bulk retry would retry now (``more`` when over ``max``)."""
    filters, maximum = _bulk_filters(filters), _check_max(maximum)
    async with project_scope(ctx, project_id, Permission.TASK_RETRY) as (conn, _access):
        found = await _matching(conn, project_id, filters, maximum + 1)
    return {"count": min(len(found), maximum), "more": len(found) > maximum, "max": maximum}


def _filters_json(filters: TaskFilters) -> dict[str, Any]:
    return {k: (v.isoformat() if hasattr(v, "isoformat") else str(v) if isinstance(v, uuid.UUID)
                else list(v) if isinstance(v, tuple) else v)
            for k, v in asdict(filters).items() if v not in (None, ())}  # fmt: skip


async def start(
    ctx: Ctx, project_id: uuid.UUID, filters: TaskFilters, maximum: int
) -> dict[str, Any]:
    filters, maximum = _bulk_filters(filters), _check_max(maximum)
    async with project_scope(ctx, project_id, Permission.TASK_RETRY) as (conn, _access):
        ids = await _matching(conn, project_id, filters, maximum)
        if not ids:
            raise InvalidInput("No task matches these filters.", field="filters")
        described = _filters_json(filters)
        row = await bulk_store.create(conn, project_id, described, ids, ctx.actor_id)
        await audit.record(
            conn,
            ctx.brain,
            "task.bulk_retry",
            actor=ctx.actor_id,
            project_id=project_id,
            target_type="bulk_retry",
            target_id=row["id"],
            details={"filters": described, "count": len(ids), "max": maximum},
        )
    return await _with_progress(row, {})


async def _with_progress(row: dict[str, Any], counts: dict[str, int]) -> dict[str, Any]:
    total = len(row["task_ids"])
    issued = sum(counts.values())
    return {
        "id": row["id"],
        "status": row["status"],
        "filters": row["filters"],
        "total": total,
        "processed": row["next_index"],
        "skipped": row["next_index"] - issued,
        "commands": counts,
        "error": row["error"],
        "created_at": row["created_at"],
        "finished_at": row["finished_at"],
    }


async def access_bulk_retry(ctx: Ctx, project_id: uuid.UUID, bulk_id: uuid.UUID) -> dict[str, Any]:
    async with project_scope(ctx, project_id) as (conn, _access):
        row = await bulk_store.get(conn, project_id, bulk_id)
        if row is None:
            raise BulkRetryNotFound(bulk_id=str(bulk_id))
        counts = await bulk_store.progress(conn, bulk_id)
    return await _with_progress(row, counts)
