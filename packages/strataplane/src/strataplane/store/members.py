"""tenant_member: a user's membership of one tenant (disabled here, never the user)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from uuid import UUID

from platformkit.db.scope import Conn

from strataplane.store.rows import maybe

_SELECT = (
    "SELECT m.tenant_id, m.user_id, m.source, m.created_at, m.disabled_at, u.kind, "
    "u.issuer, u.subject, u.display_name, u.email, u.disabled_at AS user_disabled_at "
    "FROM tenant_member m JOIN app_user u ON u.id = m.user_id "
)


@dataclass(frozen=True)
class Member:
    tenant_id: UUID
    user_id: UUID
    source: str
    created_at: datetime
    disabled_at: datetime | None
    kind: str
    issuer: str
    subject: str
    display_name: str
    email: str | None
    user_disabled_at: datetime | None

    @property
    def active(self) -> bool:
        return self.disabled_at is None and self.user_disabled_at is None


async def insert_member(conn: Conn, tenant_id: UUID, user_id: UUID, source: str) -> Member:
    await conn.execute(
        "INSERT INTO tenant_member (tenant_id, user_id, source) VALUES (%s, %s, %s)",
        (tenant_id, user_id, source),
    )
    found = await get_member(conn, tenant_id, user_id)
    if found is None:
        raise LookupError("inserted membership is not visible in this scope")
    return found


async def get_member(conn: Conn, tenant_id: UUID, user_id: UUID) -> Member | None:
    cur = await conn.execute(
        _SELECT + "WHERE m.tenant_id = %s AND m.user_id = %s", (tenant_id, user_id)
    )
    row = await maybe(cur)
    return Member(**row) if row is not None else None


async def list_members(
    conn: Conn, tenant_id: UUID, *, after: UUID | None, limit: int
) -> list[Member]:
    cur = await conn.execute(
        _SELECT
        + "WHERE m.tenant_id = %(t)s AND (%(after)s::uuid IS NULL OR m.user_id > %(after)s) "
        "ORDER BY m.user_id LIMIT %(limit)s",
        {"t": tenant_id, "after": after, "limit": limit},
    )
    return [Member(**row) for row in await cur.fetchall()]


async def set_disabled(conn: Conn, tenant_id: UUID, user_id: UUID, disabled: bool) -> bool:
    cur = await conn.execute(
        "UPDATE tenant_member SET disabled_at = CASE WHEN %s THEN coalesce(disabled_at, now()) "
        "END WHERE tenant_id = %s AND user_id = %s",
        (disabled, tenant_id, user_id),
    )
    return cur.rowcount == 1


async def delete_member(conn: Conn, tenant_id: UUID, user_id: UUID) -> bool:
    """Removes the membership and, by cascade, the user's bindings, tokens and team
    memberships in this tenant."""
    cur = await conn.execute(
        "DELETE FROM tenant_member WHERE tenant_id = %s AND user_id = %s", (tenant_id, user_id)
    )
    return cur.rowcount == 1


async def active_tenants_of(conn: Conn, user_id: UUID) -> list[dict[str, object]]:
    """The tenants a user can choose at login (platform scope): active tenant, active
    membership."""
    cur = await conn.execute(
        "SELECT t.id, t.slug, t.display_name FROM tenant_member m JOIN tenant t "
        "ON t.id = m.tenant_id WHERE m.user_id = %s AND m.disabled_at IS NULL "
        "AND t.state = 'active' ORDER BY t.slug",
        (user_id,),
    )
    return list(await cur.fetchall())
