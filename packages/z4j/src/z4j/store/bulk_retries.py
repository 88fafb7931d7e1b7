"""Bulk retries: the ``bulk_retries`` table (migration 0020) and the progress of one, counted
from the commands it issued."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from platformkit.db.scope import Conn
from platformkit.ids import uuid7
from psycopg.types.json import Jsonb

_COLUMNS = """id, project_id, filters, task_ids, next_index, status, error, created_by,
    created_at, updated_at, finished_at"""


async def create(
    conn: Conn,
    project_id: uuid.UUID,
    filters: dict[str, Any],
    task_ids: list[uuid.UUID],
    created_by: uuid.UUID | None,
) -> dict[str, Any]:
    cur = await conn.execute(
        f"""INSERT INTO bulk_retries (id, project_id, filters, task_ids, created_by)
            VALUES (%s, %s, %s, %s, %s) RETURNING {_COLUMNS}""",
        (uuid7(), project_id, Jsonb(filters), task_ids, created_by),
    )
    row = await cur.fetchone()
    assert row is not None
    return row


async def get(conn: Conn, project_id: uuid.UUID, bulk_id: uuid.UUID) -> dict[str, Any] | None:
    cur = await conn.execute(
        f"SELECT {_COLUMNS} FROM bulk_retries WHERE project_id = %s AND id = %s",
        (project_id, bulk_id),
    )
    return await cur.fetchone()


async def running(conn: Conn, limit: int = 20) -> list[dict[str, Any]]:
    """Platform scope: bulk retries still issuing or waiting for results, oldest first."""
    cur = await conn.execute(
        f"SELECT {_COLUMNS} FROM bulk_retries WHERE status = 'running' "
        "ORDER BY created_at LIMIT %s",
        (limit,),
    )
    return await cur.fetchall()


async def lock(conn: Conn, bulk_id: uuid.UUID) -> dict[str, Any] | None:
    cur = await conn.execute(
        f"SELECT {_COLUMNS} FROM bulk_retries WHERE id = %s AND status = 'running' "
        "FOR UPDATE SKIP LOCKED",
        (bulk_id,),
    )
    return await cur.fetchone()


async def advance(conn: Conn, bulk_id: uuid.UUID, next_index: int, now: datetime) -> None:
    await conn.execute(
        "UPDATE bulk_retries SET next_index = %s, updated_at = %s WHERE id = %s",
        (next_index, now, bulk_id),
    )


async def finish(
    conn: Conn, bulk_id: uuid.UUID, status: str, now: datetime, error: str | None = None
) -> None:
    await conn.execute(
        "UPDATE bulk_retries SET status = %s, error = %s, finished_at = %s, updated_at = %s "
        "WHERE id = %s",
        (status, error, now, now, bulk_id),
    )


async def progress(conn: Conn, bulk_id: uuid.UUID) -> dict[str, int]:
    """Commands of the bulk retry by status."""
    cur = await conn.execute(
        "SELECT status::text AS status, count(*) AS n FROM commands WHERE bulk_id = %s "
        "GROUP BY status",
        (bulk_id,),
    )
    return {row["status"]: int(row["n"]) for row in await cur.fetchall()}
