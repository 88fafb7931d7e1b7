"""operation: what the API shows of a long request; the work runs as an absurd task.

``tenant_id`` NULL is a platform operation (tenant deletion), visible in platform scope only.
One operation of a kind runs per object (the unique index operation_active).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

from platformkit.db.scope import Conn
from psycopg.types.json import Jsonb

from strataplane.store.rows import maybe, one

_COLUMNS = (
    "id, tenant_id, kind, object_id, state::text AS state, progress, result, error, "
    "created_by, created_at, finished_at"
)


@dataclass(frozen=True)
class Operation:
    id: UUID
    tenant_id: UUID | None
    kind: str
    object_id: str
    state: str
    progress: float | None
    result: Any
    error: Any
    created_by: UUID | None
    created_at: datetime
    finished_at: datetime | None


async def insert_or_get_active(
    conn: Conn,
    operation_id: UUID,
    *,
    tenant_id: UUID | None,
    kind: str,
    object_id: str,
    created_by: UUID | None,
) -> tuple[Operation, bool]:
    """Insert a queued operation, or return the one of this kind and object that is queued or
    running; the flag says whether this call created it."""
    cur = await conn.execute(
        "INSERT INTO operation (id, tenant_id, kind, object_id, created_by) "
        "VALUES (%s, %s, %s, %s, %s) ON CONFLICT (kind, object_id) "
        f"WHERE state IN ('queued', 'running') DO NOTHING RETURNING {_COLUMNS}",
        (operation_id, tenant_id, kind, object_id, created_by),
    )
    row = await maybe(cur)
    if row is not None:
        return Operation(**row), True
    cur = await conn.execute(
        f"SELECT {_COLUMNS} FROM operation WHERE kind = %s AND object_id = %s "
        "AND state IN ('queued', 'running')",
        (kind, object_id),
    )
    return Operation(**await one(cur)), False


async def get_operation(conn: Conn, tenant_id: UUID | None, operation_id: UUID) -> Operation | None:
    cur = await conn.execute(
        f"SELECT {_COLUMNS} FROM operation WHERE tenant_id IS NOT DISTINCT FROM %s AND id = %s",
        (tenant_id, operation_id),
    )
    row = await maybe(cur)
    return Operation(**row) if row is not None else None


async def set_running(conn: Conn, operation_id: UUID, progress: float = 0.0) -> None:
    await conn.execute(
        "UPDATE operation SET state = 'running', progress = %s WHERE id = %s "
        "AND state IN ('queued', 'running')",
        (progress, operation_id),
    )


async def finish(conn: Conn, operation_id: UUID, *, result: Any = None, error: Any = None) -> None:
    state = "failed" if error is not None else "succeeded"
    await conn.execute(
        "UPDATE operation SET state = %s, result = %s, error = %s, finished_at = now(), "
        "progress = CASE WHEN %s = 'succeeded' THEN 1 ELSE progress END WHERE id = %s",
        (
            state,
            Jsonb(result) if result is not None else None,
            Jsonb(error) if error is not None else None,
            state,
            operation_id,
        ),
    )


async def purge_finished(conn: Conn, hours: int = 24) -> int:
    cur = await conn.execute(
        "DELETE FROM operation WHERE finished_at < now() - make_interval(hours => %s)", (hours,)
    )
    return cur.rowcount
