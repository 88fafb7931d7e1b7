"""Reading tasks and events: the filtered, keyset-paginated task list and one task's timeline.

Every list query walks an index in ``(created_at DESC, id DESC)`` order under one equality
prefix and stops after ``limit + 1`` rows, so a page costs the same at row 50 and row
5,000,000:

* no filter: ``tasks_project_created (project_id, created_at DESC, id DESC)``;
* ``state``: ``tasks_project_state_created``; several states become one branch per state,
  each limited and merged (``UNION ALL`` + ``LIMIT``), since one index scan cannot return
  ``state = ANY(...)`` in created order;
* ``name`` (exact, or prefix with a trailing ``*``), ``queue``, ``agent_id``: their
  ``tasks_project_<col>_created`` indexes (migration 0002). A name prefix matches a range of
  the index and is then sorted, so a prefix matching millions of rows is the one slow case;
* ``since``/``until`` on ``created_at`` bound the same scans; on ``enqueued_at`` they filter;
* ``q`` is a substring filter over the text of the redacted args and kwargs, applied while
  walking one of the scans above. The caller bounds it by a time window and a statement
  timeout (see ``z4j.actions.tasks``); no extra index is kept for it.

The cursor is opaque to clients: URL-safe base64 of ``[created_at, id, direction]``.
"""

from __future__ import annotations

import base64
import binascii
import json
import uuid
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, Literal

from platformkit.db.scope import Conn
from psycopg import sql

TASK_STATES = ("pending", "started", "succeeded", "failed", "cancelled", "retried", "lost")
_LIST_COLUMNS = (
    "id",
    "engine",
    "engine_task_id",
    "name",
    "queue",
    "state",
    "agent_id",
    "worker",
    "retries",
    "runtime_ms",
    "enqueued_at",
    "started_at",
    "finished_at",
    "created_at",
    "updated_at",
)
_DETAIL_EXTRA = ("args_redacted", "kwargs_redacted", "error", "retried_as", "group_id", "state_at")


@dataclass(frozen=True)
class TaskFilters:
    states: tuple[str, ...] = ()
    name: str | None = None
    queue: str | None = None
    agent_id: uuid.UUID | None = None
    since: datetime | None = None
    until: datetime | None = None
    time_field: Literal["created", "enqueued"] = "created"
    q: str | None = None


@dataclass(frozen=True)
class Cursor:
    created_at: datetime
    id: uuid.UUID
    newer: bool = False  # the page of rows newer than this position, instead of older

    def encode(self) -> str:
        raw = json.dumps([self.created_at.isoformat(), str(self.id), "n" if self.newer else "o"])
        return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")

    @classmethod
    def decode(cls, text: str) -> Cursor:
        """Raise ValueError for anything this module did not encode."""
        try:
            raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
            created, ident, direction = json.loads(raw)
            at = datetime.fromisoformat(created)
            if at.tzinfo is None or direction not in ("n", "o"):
                raise ValueError("bad cursor fields")
            return cls(at, uuid.UUID(ident), direction == "n")
        except (binascii.Error, TypeError, ValueError, UnicodeDecodeError) as exc:
            raise ValueError("malformed cursor") from exc


@dataclass(frozen=True)
class Page:
    items: list[dict[str, Any]]
    older: Cursor | None
    newer: Cursor | None


def _like_escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def _conditions(
    project_id: uuid.UUID, f: TaskFilters, cursor: Cursor | None
) -> tuple[list[sql.Composable], list[Any]]:
    where: list[sql.Composable] = [sql.SQL("project_id = %s")]
    params: list[Any] = [project_id]
    if f.name:
        if f.name.endswith("*"):
            where.append(sql.SQL("name LIKE %s"))
            params.append(_like_escape(f.name[:-1]) + "%")
        else:
            where.append(sql.SQL("name = %s"))
            params.append(f.name)
    for name, value in (("queue", f.queue), ("agent_id", f.agent_id)):
        if value is not None:
            where.append(sql.SQL("{} = %s").format(sql.Identifier(name)))
            params.append(value)
    column = sql.Identifier("created_at" if f.time_field == "created" else "enqueued_at")
    if f.since is not None:
        where.append(sql.SQL("{} >= %s").format(column))
        params.append(f.since)
    if f.until is not None:
        where.append(sql.SQL("{} < %s").format(column))
        params.append(f.until)
    if f.q:
        where.append(
            sql.SQL(
                "(coalesce(args_redacted::text, '') || ' ' || coalesce(kwargs_redacted::text, ''))"
                " ILIKE %s"
            )
        )
        params.append("%" + _like_escape(f.q) + "%")
    if cursor is not None:
        op = sql.SQL(">") if cursor.newer else sql.SQL("<")
        where.append(sql.SQL("(created_at, id) {} (%s, %s)").format(op))
        params += [cursor.created_at, cursor.id]
    return where, params


def _branch(where: list[sql.Composable], order: sql.Composable) -> sql.Composable:
    return sql.SQL("(SELECT {cols} FROM tasks WHERE {where} ORDER BY {order} LIMIT %s)").format(
        cols=sql.SQL(", ").join(map(sql.Identifier, _LIST_COLUMNS)),
        where=sql.SQL(" AND ").join(where),
        order=order,
    )


def list_query(
    project_id: uuid.UUID, f: TaskFilters, cursor: Cursor | None, limit: int
) -> tuple[sql.Composed, list[Any]]:
    """The one statement that reads a page (``limit + 1`` rows, to know if more exist)."""
    direction = sql.SQL("ASC" if cursor is not None and cursor.newer else "DESC")
    order = sql.SQL("created_at {d}, id {d}").format(d=direction)
    where, params = _conditions(project_id, f, cursor)
    branches: list[sql.Composable] = []
    all_params: list[Any] = []
    for state in f.states or (None,):
        extra: list[sql.Composable] = (
            [sql.SQL("state = %s::task_state")] if state is not None else []
        )
        branches.append(_branch(where + extra, order))
        all_params += [*params, *([state] if state is not None else []), limit + 1]
    query = sql.SQL(
        "SELECT t.*, a.name AS agent_name FROM ({branches}) AS t "
        "LEFT JOIN agents a ON a.id = t.agent_id "
        "ORDER BY t.created_at {d}, t.id {d} LIMIT %s"
    ).format(branches=sql.SQL(" UNION ALL ").join(branches), d=direction)
    return query, [*all_params, limit + 1]


async def list_page(
    conn: Conn, project_id: uuid.UUID, f: TaskFilters, cursor: Cursor | None, limit: int
) -> Page:
    query, params = list_query(project_id, f, cursor, limit)
    cur = await conn.execute(query, params)
    rows = await cur.fetchall()
    more = len(rows) > limit
    rows = rows[:limit]
    if cursor is not None and cursor.newer:
        rows.reverse()
        older = _at(rows[-1]) if rows else replace(cursor, newer=False)
        return Page(rows, older, _at(rows[0], newer=True) if more and rows else None)
    return Page(
        rows,
        _at(rows[-1]) if more else None,
        _at(rows[0], newer=True) if cursor is not None and rows else None,
    )


def _at(row: dict[str, Any], newer: bool = False) -> Cursor:
    return Cursor(row["created_at"], row["id"], newer)


async def get_task(conn: Conn, project_id: uuid.UUID, task_id: uuid.UUID) -> dict[str, Any] | None:
    cols = sql.SQL(", ").join(sql.Identifier("t", c) for c in (*_LIST_COLUMNS, *_DETAIL_EXTRA))
    cur = await conn.execute(
        sql.SQL(
            "SELECT {cols}, a.name AS agent_name FROM tasks t "
            "LEFT JOIN agents a ON a.id = t.agent_id WHERE t.project_id = %s AND t.id = %s"
        ).format(cols=cols),
        (project_id, task_id),
    )
    return await cur.fetchone()


async def task_events(
    conn: Conn, project_id: uuid.UUID, task_id: uuid.UUID
) -> list[dict[str, Any]]:
    """The timeline: agent time first, brain receipt time to order events the agent stamped
    alike."""
    cur = await conn.execute(
        "SELECT id, event_type, ts, created_at, agent_id, payload FROM events "
        "WHERE task_id = %s AND project_id = %s ORDER BY ts, created_at, id",
        (task_id, project_id),
    )
    return await cur.fetchall()


async def counts_by_state(conn: Conn, project_id: uuid.UUID, since: datetime) -> dict[str, int]:
    cur = await conn.execute(
        "SELECT state::text AS state, count(*) AS n FROM tasks "
        "WHERE project_id = %s AND created_at >= %s GROUP BY state",
        (project_id, since),
    )
    found = {row["state"]: int(row["n"]) for row in await cur.fetchall()}
    return {state: found.get(state, 0) for state in TASK_STATES}
