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
