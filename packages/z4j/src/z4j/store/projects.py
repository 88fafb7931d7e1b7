"""Projects: the tenants of the brain. Rows carry the caller's membership role when asked."""

from __future__ import annotations

import uuid
from typing import Any

from platformkit.db.scope import Conn
from platformkit.ids import uuid7
from psycopg.types.json import Jsonb

_COLUMNS = "p.id, p.name, p.settings, p.created_at, p.updated_at"


async def create(conn: Conn, name: str) -> dict[str, Any] | None:
    """Insert a project; None when the name is taken."""
    cur = await conn.execute(
        "INSERT INTO projects AS p (id, name) VALUES (%s, %s) ON CONFLICT (name) DO NOTHING "
        f"RETURNING {_COLUMNS}",
        (uuid7(), name),
    )
    return await cur.fetchone()


async def get_for_user(
    conn: Conn, project_id: uuid.UUID, user_id: uuid.UUID
) -> dict[str, Any] | None:
    """The project with ``role``: the user's membership role, or NULL when not a member."""
    cur = await conn.execute(
        f"SELECT {_COLUMNS}, m.role::text AS role FROM projects p "
        "LEFT JOIN memberships m ON m.project_id = p.id AND m.user_id = %s WHERE p.id = %s",
        (user_id, project_id),
    )
    return await cur.fetchone()


async def list_for_user(
    conn: Conn, user_id: uuid.UUID, *, all_projects: bool
) -> list[dict[str, Any]]:
    """Projects the user is a member of, or every project (with the role where there is one)."""
    cur = await conn.execute(
        f"SELECT {_COLUMNS}, m.role::text AS role FROM projects p "
        "LEFT JOIN memberships m ON m.project_id = p.id AND m.user_id = %s "
        "WHERE %s OR m.role IS NOT NULL ORDER BY p.name",
        (user_id, all_projects),
    )
    return await cur.fetchall()


async def settings_of(conn: Conn, project_id: uuid.UUID) -> dict[str, Any]:
    cur = await conn.execute("SELECT settings FROM projects WHERE id = %s", (project_id,))
    row = await cur.fetchone()
    return dict(row["settings"] or {}) if row else {}


async def get_by_name(conn: Conn, name: str) -> dict[str, Any] | None:
    cur = await conn.execute(f"SELECT {_COLUMNS} FROM projects p WHERE p.name = %s", (name,))
    return await cur.fetchone()


async def set_setting(conn: Conn, project_id: uuid.UUID, key: str, value: Any) -> None:
    """Set one key of ``projects.settings`` (the rest stays)."""
    await conn.execute(
        "UPDATE projects SET settings = settings || jsonb_build_object(%s::text, %s::jsonb), "
        "updated_at = now() WHERE id = %s",
        (key, Jsonb(value), project_id),
    )
