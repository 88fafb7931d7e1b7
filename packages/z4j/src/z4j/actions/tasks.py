"""Reading tasks: the filtered list (API and dashboard share it) and one task with its events.

Search (``q``) is a substring match over the redacted args and kwargs text. It has no index of
its own: it filters rows while the list walks its index, newest first, and stops at a full page.
A rare term in a large project could walk far, so a search without ``since`` looks at the last
``SEARCH_WINDOW`` of created tasks and every search runs under ``SEARCH_TIMEOUT``; hitting the
timeout answers ``task.search_too_broad`` rather than holding a connection.
"""

from __future__ import annotations

import dataclasses
import uuid
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from psycopg import errors as pg_errors

from z4j.actions.access import ProjectAccess, project_scope
from z4j.actions.context import Ctx
from z4j.actions.errors import InvalidCursor, InvalidInput, SearchTooBroad, TaskNotFound
from z4j.store import commands as command_store
from z4j.store import tasks_read
from z4j.store.tasks_read import Cursor, Page, TaskFilters

DEFAULT_LIMIT = 50
MAX_LIMIT = 200
SEARCH_WINDOW = timedelta(days=7)
SEARCH_TIMEOUT = "5s"
MAX_QUERY = 200


@dataclass(frozen=True)
class TaskList:
    access: ProjectAccess
    page: Page
    filters: TaskFilters  # as applied, including a default search window
    limit: int


def _checked(filters: TaskFilters, limit: int) -> TaskFilters:
    if not 1 <= limit <= MAX_LIMIT:
        raise InvalidInput(f"limit is between 1 and {MAX_LIMIT}.", field="limit")
    return checked_filters(filters)


def checked_filters(filters: TaskFilters) -> TaskFilters:
    """The filters as the list applies them (bulk retry selects with the same)."""
    unknown = set(filters.states) - set(tasks_read.TASK_STATES)
    if unknown:
        raise InvalidInput(
            f"Unknown state {sorted(unknown)[0]!r}.",
            field="state",
            allowed=list(tasks_read.TASK_STATES),
        )
    if filters.since and filters.until and filters.since >= filters.until:
        raise InvalidInput("since must be before until.", field="since")
    for field in ("since", "until"):
        value = getattr(filters, field)
        if value is not None and value.tzinfo is None:
            filters = replace(filters, **{field: value.replace(tzinfo=UTC)})
    if filters.q is not None and len(filters.q) > MAX_QUERY:
        raise InvalidInput(f"q has at most {MAX_QUERY} characters.", field="q")
    if filters.q and filters.since is None and filters.time_field == "created":
        filters = replace(filters, since=datetime.now(UTC) - SEARCH_WINDOW)
    return replace(filters, states=tuple(dict.fromkeys(filters.states)))


async def list_tasks(
    ctx: Ctx,
    project_id: uuid.UUID,
    filters: TaskFilters,
    cursor: str | None = None,
    limit: int = DEFAULT_LIMIT,
) -> TaskList:
    filters = _checked(filters, limit)
    try:
        position = Cursor.decode(cursor) if cursor else None
    except ValueError:
        raise InvalidCursor() from None
    async with project_scope(ctx, project_id) as (conn, access):
        if filters.q:
            await conn.execute(f"SET LOCAL statement_timeout = '{SEARCH_TIMEOUT}'")
        try:
            page = await tasks_read.list_page(conn, project_id, filters, position, limit)
            if position is not None and position.newer and page.newer is None:
                # Back at the newest rows: show a full first page rather than a short one.
                page = await tasks_read.list_page(conn, project_id, filters, None, limit)
        except pg_errors.QueryCanceled:
            raise SearchTooBroad() from None
    return TaskList(access, page, filters, limit)


@dataclass(frozen=True)
class TaskDetail:
    access: ProjectAccess
    task: dict[str, Any]
    events: list[dict[str, Any]]
    retry_of: uuid.UUID | None = None  # the task this one was retried from
    commands: list[dict[str, Any]] = dataclasses.field(default_factory=list)  # newest first


async def access_task(ctx: Ctx, project_id: uuid.UUID, task_id: uuid.UUID) -> TaskDetail:
    async with project_scope(ctx, project_id) as (conn, access):
        task = await tasks_read.get_task(conn, project_id, task_id)
        if task is None:
            raise TaskNotFound(task_id=str(task_id))
        events = await tasks_read.task_events(conn, project_id, task_id)
        retry_of = await command_store.retry_of(conn, project_id, task_id)
        commands = await command_store.list_for_project(conn, project_id, 20, task_id)
    return TaskDetail(access, task, events, retry_of, commands)
