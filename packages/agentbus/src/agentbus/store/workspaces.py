"""workspaces: the model resource of the management API (04-API-SPEC §10.2)."""

from __future__ import annotations

import uuid
from typing import Any

from platformkit.db.scope import Conn
from platformkit.ids import uuid7

Row = dict[str, Any]

COLUMNS = "id, tenant_id, slug, display_name, description, settings, created_at, deleted_at"


async def insert_workspace(
    conn: Conn, tenant_id: uuid.UUID, *, slug: str, display_name: str, description: str | None
) -> Row:
    cur = await conn.execute(
        f"""INSERT INTO workspaces (id, tenant_id, slug, display_name, description)
            VALUES (%s, %s, %s, %s, %s) RETURNING {COLUMNS}""",
        (uuid7(), tenant_id, slug, display_name, description),
    )
    row = await cur.fetchone()
    assert row is not None
    return row


async def get_workspace(conn: Conn, tenant_id: uuid.UUID, workspace_id: uuid.UUID) -> Row | None:
    cur = await conn.execute(
        f"SELECT {COLUMNS} FROM workspaces WHERE tenant_id = %s AND id = %s",
        (tenant_id, workspace_id),
    )
    return await cur.fetchone()


async def list_workspaces(
    conn: Conn, tenant_id: uuid.UUID, *, include_deleted: bool = False
) -> list[Row]:
    cur = await conn.execute(
        f"""SELECT {COLUMNS} FROM workspaces
            WHERE tenant_id = %s AND (%s OR deleted_at IS NULL) ORDER BY id""",
        (tenant_id, include_deleted),
    )
    return await cur.fetchall()


async def count_live_workspaces(conn: Conn, tenant_id: uuid.UUID) -> int:
    cur = await conn.execute(
        "SELECT count(*) AS n FROM workspaces WHERE tenant_id = %s AND deleted_at IS NULL",
        (tenant_id,),
    )
    row = await cur.fetchone()
    return int(row["n"]) if row else 0
