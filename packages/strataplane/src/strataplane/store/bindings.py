"""role_binding: roles given to a user or a team, over the tenant, a team's objects or the
hosts a selector matches."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

from platformkit.db.scope import Conn
from psycopg.types.json import Jsonb

from strataplane.store.rows import maybe, one

_COLUMNS = (
    "id, tenant_id, user_id, team_id, role::text AS role, scope_kind, scope_team_id, "
    "scope_selector, created_by, created_at"
)


@dataclass(frozen=True)
class RoleBinding:
    id: UUID
    tenant_id: UUID
    user_id: UUID | None
    team_id: UUID | None
    role: str
    scope_kind: str
    scope_team_id: UUID | None
    scope_selector: dict[str, Any] | None
    created_by: UUID | None
    created_at: datetime


async def insert_binding(
    conn: Conn,
    tenant_id: UUID,
    binding_id: UUID,
    *,
    user_id: UUID | None,
    team_id: UUID | None,
    role: str,
    scope_kind: str,
    scope_team_id: UUID | None,
    scope_selector: dict[str, Any] | None,
    created_by: UUID | None,
) -> RoleBinding:
    cur = await conn.execute(
        "INSERT INTO role_binding (id, tenant_id, user_id, team_id, role, scope_kind, "
        "scope_team_id, scope_selector, created_by) "
        f"VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s) RETURNING {_COLUMNS}",
        (
            binding_id,
            tenant_id,
            user_id,
            team_id,
            role,
            scope_kind,
            scope_team_id,
            Jsonb(scope_selector) if scope_selector is not None else None,
            created_by,
        ),
    )
    return RoleBinding(**await one(cur))


async def get_binding(conn: Conn, tenant_id: UUID, binding_id: UUID) -> RoleBinding | None:
    cur = await conn.execute(
        f"SELECT {_COLUMNS} FROM role_binding WHERE tenant_id = %s AND id = %s",
        (tenant_id, binding_id),
    )
    row = await maybe(cur)
    return RoleBinding(**row) if row is not None else None


async def list_bindings(
    conn: Conn,
    tenant_id: UUID,
    *,
    user_id: UUID | None = None,
    team_id: UUID | None = None,
    after: UUID | None = None,
    limit: int = 100,
) -> list[RoleBinding]:
    cur = await conn.execute(
        f"SELECT {_COLUMNS} FROM role_binding WHERE tenant_id = %(t)s "
        "AND (%(user)s::uuid IS NULL OR user_id = %(user)s) "
        "AND (%(team)s::uuid IS NULL OR team_id = %(team)s) "
        "AND (%(after)s::uuid IS NULL OR id > %(after)s) ORDER BY id LIMIT %(limit)s",
        {"t": tenant_id, "user": user_id, "team": team_id, "after": after, "limit": limit},
    )
    return [RoleBinding(**row) for row in await cur.fetchall()]


async def effective_bindings(
    conn: Conn, tenant_id: UUID, user_id: UUID, *, with_teams: bool
) -> list[RoleBinding]:
    """The user's own bindings plus, for humans, those of the teams they are a member of."""
    cur = await conn.execute(
        f"SELECT {_COLUMNS} FROM role_binding WHERE tenant_id = %(t)s AND (user_id = %(u)s "
        "OR (%(teams)s AND team_id IN (SELECT team_id FROM team_member "
        "WHERE tenant_id = %(t)s AND user_id = %(u)s))) ORDER BY id",
        {"t": tenant_id, "u": user_id, "teams": with_teams},
    )
    return [RoleBinding(**row) for row in await cur.fetchall()]


async def delete_binding(conn: Conn, tenant_id: UUID, binding_id: UUID) -> bool:
    cur = await conn.execute(
        "DELETE FROM role_binding WHERE tenant_id = %s AND id = %s", (tenant_id, binding_id)
    )
    return cur.rowcount == 1


async def active_admins(conn: Conn, tenant_id: UUID) -> int:
    """Human users holding admin in the tenant (directly or through a team) whose membership
    and account are enabled."""
    cur = await conn.execute(
        "SELECT count(DISTINCT m.user_id) AS n FROM role_binding b "
        "LEFT JOIN team_member tm ON tm.tenant_id = b.tenant_id AND tm.team_id = b.team_id "
        "JOIN tenant_member m ON m.tenant_id = b.tenant_id "
        "AND m.user_id = coalesce(b.user_id, tm.user_id) JOIN app_user u ON u.id = m.user_id "
        "WHERE b.tenant_id = %s AND b.role = 'admin' AND m.disabled_at IS NULL "
        "AND u.disabled_at IS NULL AND u.kind = 'human'",
        (tenant_id,),
    )
    return int((await one(cur))["n"])
