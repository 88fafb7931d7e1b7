"""team and team_member: the model resource (docs/strataplane/architecture.md §1.3)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from uuid import UUID

from platformkit.db.scope import Conn

from strataplane.store.rows import maybe, one

_COLUMNS = "id, tenant_id, slug, display_name, source, external_id, created_at"


@dataclass(frozen=True)
class Team:
    id: UUID
    tenant_id: UUID
    slug: str
    display_name: str
    source: str
    external_id: str | None
    created_at: datetime


@dataclass(frozen=True)
class TeamMember:
    user_id: UUID
    display_name: str
    kind: str
    synced_at: datetime


async def insert_team(
    conn: Conn,
    tenant_id: UUID,
    team_id: UUID,
    slug: str,
    display_name: str,
    external_id: str | None = None,
) -> Team:
    """A local team, or (``external_id`` given: the OIDC group it mirrors) an oidc team."""
    source = "local" if external_id is None else "oidc"
    cur = await conn.execute(
        "INSERT INTO team (id, tenant_id, slug, display_name, source, external_id) "
        f"VALUES (%s, %s, %s, %s, %s, %s) RETURNING {_COLUMNS}",
        (team_id, tenant_id, slug, display_name, source, external_id),
    )
    return Team(**await one(cur))


async def get_team(conn: Conn, tenant_id: UUID, team_id: UUID) -> Team | None:
    cur = await conn.execute(
        f"SELECT {_COLUMNS} FROM team WHERE tenant_id = %s AND id = %s", (tenant_id, team_id)
    )
    row = await maybe(cur)
    return Team(**row) if row is not None else None


async def list_teams(conn: Conn, tenant_id: UUID, *, after: str | None, limit: int) -> list[Team]:
    """Keyset pagination on slug."""
    cur = await conn.execute(
        f"SELECT {_COLUMNS} FROM team WHERE tenant_id = %(t)s "
        "AND (%(after)s::text IS NULL OR slug > %(after)s) ORDER BY slug LIMIT %(limit)s",
        {"t": tenant_id, "after": after, "limit": limit},
    )
    return [Team(**row) for row in await cur.fetchall()]


async def update_team(
    conn: Conn, tenant_id: UUID, team_id: UUID, *, display_name: str
) -> Team | None:
    cur = await conn.execute(
        f"UPDATE team SET display_name = %s WHERE tenant_id = %s AND id = %s RETURNING {_COLUMNS}",
        (display_name, tenant_id, team_id),
    )
    row = await maybe(cur)
    return Team(**row) if row is not None else None


async def team_scopes_a_binding(conn: Conn, tenant_id: UUID, team_id: UUID) -> bool:
    cur = await conn.execute(
        "SELECT 1 FROM role_binding WHERE tenant_id = %s AND scope_team_id = %s LIMIT 1",
        (tenant_id, team_id),
    )
    return await maybe(cur) is not None


async def delete_team(conn: Conn, tenant_id: UUID, team_id: UUID) -> bool:
    cur = await conn.execute(
        "DELETE FROM team WHERE tenant_id = %s AND id = %s", (tenant_id, team_id)
    )
    return cur.rowcount == 1


async def add_team_member(conn: Conn, tenant_id: UUID, team_id: UUID, user_id: UUID) -> None:
    await conn.execute(
        "INSERT INTO team_member (tenant_id, team_id, user_id) VALUES (%s, %s, %s)",
        (tenant_id, team_id, user_id),
    )


async def remove_team_member(conn: Conn, tenant_id: UUID, team_id: UUID, user_id: UUID) -> bool:
    cur = await conn.execute(
        "DELETE FROM team_member WHERE tenant_id = %s AND team_id = %s AND user_id = %s",
        (tenant_id, team_id, user_id),
    )
    return cur.rowcount == 1


async def list_team_members(conn: Conn, tenant_id: UUID, team_id: UUID) -> list[TeamMember]:
    cur = await conn.execute(
        "SELECT tm.user_id, u.display_name, u.kind, tm.synced_at FROM team_member tm "
        "JOIN app_user u ON u.id = tm.user_id WHERE tm.tenant_id = %s AND tm.team_id = %s "
        "ORDER BY u.display_name, tm.user_id",
        (tenant_id, team_id),
    )
    return [TeamMember(**row) for row in await cur.fetchall()]


async def sync_oidc_teams(
    conn: Conn, tenant_id: UUID, user_id: UUID, groups: list[str]
) -> tuple[list[str], list[str]]:
    """Make the user a member of exactly the tenant's oidc teams whose external_id is among
    ``groups``; local teams are left alone. Returns the slugs joined and left."""
    cur = await conn.execute(
        "DELETE FROM team_member tm USING team t WHERE tm.tenant_id = %(t)s "
        "AND tm.user_id = %(u)s AND t.tenant_id = tm.tenant_id AND t.id = tm.team_id "
        "AND t.source = 'oidc' AND NOT (t.external_id = ANY(%(g)s)) RETURNING t.slug",
        {"t": tenant_id, "u": user_id, "g": groups},
    )
    left = sorted(row["slug"] for row in await cur.fetchall())
    cur = await conn.execute(
        "INSERT INTO team_member AS tm (tenant_id, team_id, user_id) "
        "SELECT tenant_id, id, %(u)s FROM team WHERE tenant_id = %(t)s AND source = 'oidc' "
        "AND external_id = ANY(%(g)s) ON CONFLICT (team_id, user_id) DO UPDATE "
        "SET synced_at = now() RETURNING (xmax = 0) AS joined, "
        "(SELECT slug FROM team WHERE id = tm.team_id) AS slug",
        {"t": tenant_id, "u": user_id, "g": groups},
    )
    joined = sorted(row["slug"] for row in await cur.fetchall() if row["joined"])
    return joined, left
