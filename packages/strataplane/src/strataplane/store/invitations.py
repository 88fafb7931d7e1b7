"""tenant_invitation: pending invitations of existing users to a tenant (an addition to the
spec, docs/decisions/0022)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from uuid import UUID

from platformkit.db.scope import Conn

from strataplane.store.rows import maybe, one

_COLUMNS = "id, tenant_id, user_id, created_by, created_at, expires_at"


@dataclass(frozen=True)
class Invitation:
    id: UUID
    tenant_id: UUID
    user_id: UUID
    created_by: UUID | None
    created_at: datetime
    expires_at: datetime


@dataclass(frozen=True)
class ReceivedInvitation(Invitation):
    """An invitation as its user sees it: which tenant asks."""

    tenant_slug: str
    tenant_display_name: str


async def upsert_invitation(
    conn: Conn,
    tenant_id: UUID,
    invitation_id: UUID,
    user_id: UUID,
    created_by: UUID | None,
    expires_at: datetime,
) -> Invitation:
    """A new invitation, or the user's pending one renewed (new id, creator and expiry)."""
    cur = await conn.execute(
        "INSERT INTO tenant_invitation (id, tenant_id, user_id, created_by, expires_at) "
        "VALUES (%s, %s, %s, %s, %s) ON CONFLICT (tenant_id, user_id) DO UPDATE SET "
        "id = excluded.id, created_by = excluded.created_by, created_at = now(), "
        f"expires_at = excluded.expires_at RETURNING {_COLUMNS}",
        (invitation_id, tenant_id, user_id, created_by, expires_at),
    )
    return Invitation(**await one(cur))


async def list_invitations(
    conn: Conn, tenant_id: UUID, *, after: UUID | None, limit: int
) -> list[Invitation]:
    cur = await conn.execute(
        f"SELECT {_COLUMNS} FROM tenant_invitation WHERE tenant_id = %(t)s "
        "AND expires_at > now() AND (%(after)s::uuid IS NULL OR id > %(after)s) "
        "ORDER BY id LIMIT %(limit)s",
        {"t": tenant_id, "after": after, "limit": limit},
    )
    return [Invitation(**row) for row in await cur.fetchall()]


async def delete_invitation(conn: Conn, tenant_id: UUID, invitation_id: UUID) -> bool:
    cur = await conn.execute(
        "DELETE FROM tenant_invitation WHERE tenant_id = %s AND id = %s",
        (tenant_id, invitation_id),
    )
    return cur.rowcount == 1


async def take_invitation(
    conn: Conn, tenant_id: UUID, invitation_id: UUID, user_id: UUID
) -> Invitation | None:
    """Delete and return the user's own pending invitation (None when there is none)."""
    cur = await conn.execute(
        f"DELETE FROM tenant_invitation WHERE tenant_id = %s AND id = %s AND user_id = %s "
        f"AND expires_at > now() RETURNING {_COLUMNS}",
        (tenant_id, invitation_id, user_id),
    )
    row = await maybe(cur)
    return Invitation(**row) if row is not None else None


async def received(conn: Conn, user_id: UUID) -> list[ReceivedInvitation]:
    """The user's pending invitations across tenants (platform scope), active tenants only."""
    cur = await conn.execute(
        "SELECT i.id, i.tenant_id, i.user_id, i.created_by, i.created_at, i.expires_at, "
        "t.slug AS tenant_slug, t.display_name AS tenant_display_name "
        "FROM tenant_invitation i JOIN tenant t ON t.id = i.tenant_id "
        "WHERE i.user_id = %s AND i.expires_at > now() AND t.state = 'active' ORDER BY i.id",
        (user_id,),
    )
    return [ReceivedInvitation(**row) for row in await cur.fetchall()]


async def tenant_of(conn: Conn, invitation_id: UUID, user_id: UUID) -> UUID | None:
    """The tenant of the user's own invitation (platform scope)."""
    cur = await conn.execute(
        "SELECT tenant_id FROM tenant_invitation WHERE id = %s AND user_id = %s",
        (invitation_id, user_id),
    )
    row = await maybe(cur)
    return UUID(str(row["tenant_id"])) if row is not None else None
