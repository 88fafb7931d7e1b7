"""Memberships: a user's role in a project."""

from __future__ import annotations

import uuid
from typing import Any

from platformkit.db.scope import Conn
from platformkit.ids import uuid7


async def add(
    conn: Conn, user_id: uuid.UUID, project_id: uuid.UUID, role: str
) -> dict[str, Any] | None:
    """Insert a membership; None when the user is a member already."""
    cur = await conn.execute(
        "INSERT INTO memberships (id, user_id, project_id, role) VALUES (%s, %s, %s, %s) "
        "ON CONFLICT (user_id, project_id) DO NOTHING "
        "RETURNING id, user_id, project_id, role::text AS role, created_at",
        (uuid7(), user_id, project_id, role),
    )
    return await cur.fetchone()


async def list_for_project(conn: Conn, project_id: uuid.UUID) -> list[dict[str, Any]]:
    cur = await conn.execute(
        "SELECT m.id, m.user_id, u.email, u.display_name, m.role::text AS role, m.created_at "
        "FROM memberships m JOIN users u ON u.id = m.user_id WHERE m.project_id = %s "
        "ORDER BY m.role, u.email",
        (project_id,),
    )
    return await cur.fetchall()


async def get(conn: Conn, project_id: uuid.UUID, user_id: uuid.UUID) -> dict[str, Any] | None:
    cur = await conn.execute(
        "SELECT m.id, m.user_id, u.email, u.display_name, m.role::text AS role, m.created_at "
        "FROM memberships m JOIN users u ON u.id = m.user_id "
        "WHERE m.project_id = %s AND m.user_id = %s",
        (project_id, user_id),
    )
    return await cur.fetchone()


async def lock_owners(conn: Conn, project_id: uuid.UUID) -> int:
    """The number of owners, their rows locked until the transaction ends: two owners demoting
    each other at once cannot both see the other still in place."""
    cur = await conn.execute(
        "SELECT count(*) AS owners FROM (SELECT 1 FROM memberships "
        "WHERE project_id = %s AND role = 'owner' FOR UPDATE) AS o",
        (project_id,),
    )
    row = await cur.fetchone()
    return int(row["owners"]) if row else 0


async def set_role(conn: Conn, project_id: uuid.UUID, user_id: uuid.UUID, role: str) -> None:
    await conn.execute(
        "UPDATE memberships SET role = %s WHERE project_id = %s AND user_id = %s",
        (role, project_id, user_id),
    )


async def remove(conn: Conn, project_id: uuid.UUID, user_id: uuid.UUID) -> None:
    await conn.execute(
        "DELETE FROM memberships WHERE project_id = %s AND user_id = %s", (project_id, user_id)
    )
