"""Reading the audit log: filtered pages newest first, and the rows of an export in id order.

Filters are composed with ``psycopg.sql``; pages are keyset by ``id`` (chain order), so a page
costs an index range scan wherever it starts.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from platformkit.db.scope import Conn
from psycopg import sql

_SELECT = sql.SQL(
    "SELECT a.id, a.ts, a.actor_user_id, u.email AS actor_email, a.project_id, a.action, "
    "a.target_type, a.target_id, a.details, a.row_hmac, a.prev_row_hmac "
    "FROM audit_log a LEFT JOIN users u ON u.id = a.actor_user_id"
)


@dataclass(frozen=True)
class AuditFilters:
    project_id: uuid.UUID | None = None  # None: every row (brain administrators)
    actor_id: uuid.UUID | None = None
    actor_email: str | None = None
    action: str | None = None  # exact, or a prefix ending in "." ("password.")
    target_type: str | None = None
    target_id: uuid.UUID | None = None
    since: datetime | None = None
    until: datetime | None = None


def _where(f: AuditFilters, before: uuid.UUID | None) -> tuple[sql.Composable, list[Any]]:
    parts: list[sql.Composable] = []
    params: list[Any] = []

    def add(clause: str, value: Any) -> None:
        parts.append(sql.SQL(clause))
        params.append(value)

    if f.project_id is not None:
        add("a.project_id = %s", f.project_id)
    if f.actor_id is not None:
        add("a.actor_user_id = %s", f.actor_id)
    if f.actor_email is not None:
        add("u.email = %s", f.actor_email)
    if f.action is not None and f.action.endswith("."):
        escaped = f.action.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        add("a.action LIKE %s", escaped + "%")
    elif f.action is not None:
        add("a.action = %s", f.action)
    if f.target_type is not None:
        add("a.target_type = %s", f.target_type)
    if f.target_id is not None:
        add("a.target_id = %s", f.target_id)
    if f.since is not None:
        add("a.ts >= %s", f.since)
    if f.until is not None:
        add("a.ts < %s", f.until)
    if before is not None:
        add("a.id < %s", before)
    if not parts:
        return sql.SQL(""), params
    return sql.SQL(" WHERE ") + sql.SQL(" AND ").join(parts), params


async def page(
    conn: Conn, filters: AuditFilters, before: uuid.UUID | None, limit: int
) -> list[dict[str, Any]]:
    """Up to ``limit`` rows older than ``before`` (newest first)."""
    where, params = _where(filters, before)
    query = _SELECT + where + sql.SQL(" ORDER BY a.id DESC LIMIT %s")
    cur = await conn.execute(query, [*params, limit])
    return await cur.fetchall()


async def export(
    conn: Conn, filters: AuditFilters, batch: int = 1000
) -> AsyncIterator[list[dict[str, Any]]]:
    """Every matching row in chain order, in batches, through a server-side cursor (needs a
    transaction that stays open while the caller consumes)."""
    where, params = _where(filters, None)
    async with conn.cursor(name="z4j_audit_export") as cur:
        await cur.execute(_SELECT + where + sql.SQL(" ORDER BY a.id"), params)
        while rows := await cur.fetchmany(batch):
            yield rows
