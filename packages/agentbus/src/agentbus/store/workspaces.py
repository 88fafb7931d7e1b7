"""workspaces: the model resource of the management API (04-API-SPEC §10.2)."""

from __future__ import annotations

import uuid
from typing import Any

from platformkit.db.scope import Conn
from platformkit.ids import uuid7
from psycopg.types.json import Jsonb

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


async def update_workspace(
    conn: Conn, tenant_id: uuid.UUID, workspace_id: uuid.UUID, changes: dict[str, Any]
) -> Row | None:
    """Set the given columns (``display_name``, ``description``, ``settings``) of a live
    workspace; the row, or None when there is none."""
    names = [name for name in ("display_name", "description", "settings") if name in changes]
    values = [Jsonb(changes[n]) if n == "settings" else changes[n] for n in names]
    assignments = ", ".join(f"{name} = %s" for name in names) or "display_name = display_name"
    cur = await conn.execute(
        f"""UPDATE workspaces SET {assignments}
             WHERE tenant_id = %s AND id = %s AND deleted_at IS NULL RETURNING {COLUMNS}""",
        [*values, tenant_id, workspace_id],
    )
    return await cur.fetchone()


async def count_live_agents(conn: Conn, tenant_id: uuid.UUID, workspace_id: uuid.UUID) -> int:
    cur = await conn.execute(
        """SELECT count(*) AS n FROM agents
            WHERE tenant_id = %s AND workspace_id = %s AND deleted_at IS NULL""",
        (tenant_id, workspace_id),
    )
    row = await cur.fetchone()
    return int(row["n"]) if row else 0


async def mark_deleted(conn: Conn, tenant_id: uuid.UUID, workspace_id: uuid.UUID) -> bool:
    cur = await conn.execute(
        """UPDATE workspaces SET deleted_at = now()
            WHERE tenant_id = %s AND id = %s AND deleted_at IS NULL RETURNING id""",
        (tenant_id, workspace_id),
    )
    return await cur.fetchone() is not None


_MEMBER = "user_id, role::text AS role, invited_by, created_at"


async def list_members(conn: Conn, tenant_id: uuid.UUID, workspace_id: uuid.UUID) -> list[Row]:
    cur = await conn.execute(
        f"""SELECT {_MEMBER} FROM workspace_memberships
             WHERE tenant_id = %s AND workspace_id = %s ORDER BY user_id""",
        (tenant_id, workspace_id),
    )
    return await cur.fetchall()


async def lock_admins(conn: Conn, tenant_id: uuid.UUID, workspace_id: uuid.UUID) -> list[uuid.UUID]:
    """The workspace's admins, their rows locked until commit, so two changes cannot each
    leave the other as the last admin and then both go."""
    cur = await conn.execute(
        """SELECT user_id FROM workspace_memberships
            WHERE tenant_id = %s AND workspace_id = %s AND role = 'admin'
            ORDER BY user_id FOR UPDATE""",
        (tenant_id, workspace_id),
    )
    return [row["user_id"] for row in await cur.fetchall()]


async def set_member(
    conn: Conn,
    tenant_id: uuid.UUID,
    workspace_id: uuid.UUID,
    user_id: uuid.UUID,
    role: str,
    invited_by: uuid.UUID | None,
) -> Row:
    """Add the user with ``role``, or change the role of a member (who invited it stays)."""
    cur = await conn.execute(
        f"""INSERT INTO workspace_memberships (tenant_id, workspace_id, user_id, role, invited_by)
            VALUES (%s, %s, %s, %s, %s)
            ON CONFLICT (workspace_id, user_id) DO UPDATE SET role = excluded.role
            RETURNING {_MEMBER}""",
        (tenant_id, workspace_id, user_id, role, invited_by),
    )
    row = await cur.fetchone()
    assert row is not None
    return row


async def remove_member(
    conn: Conn, tenant_id: uuid.UUID, workspace_id: uuid.UUID, user_id: uuid.UUID
) -> bool:
    cur = await conn.execute(
        """DELETE FROM workspace_memberships
            WHERE tenant_id = %s AND workspace_id = %s AND user_id = %s RETURNING user_id""",
        (tenant_id, workspace_id, user_id),
    )
    return await cur.fetchone() is not None
