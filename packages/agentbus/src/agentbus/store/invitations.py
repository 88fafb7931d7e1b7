"""invitations: pending e-mail invitations to a tenant and, optionally, one of its workspaces
(data model §1.3). Only the SHA-256 of the one-time token is stored."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from platformkit.db.scope import Conn
from platformkit.ids import uuid7

Row = dict[str, Any]
COLUMNS = (
    "id, tenant_id, workspace_id, email, role, invited_by, expires_at, accepted_at, created_at"
)


async def insert_invitation(
    conn: Conn, tenant_id: uuid.UUID, *, workspace_id: uuid.UUID | None, email: str, role: str,
    token_hash: bytes, invited_by: uuid.UUID, expires_at: datetime,
) -> Row:  # fmt: skip
    cur = await conn.execute(
        f"""INSERT INTO invitations (id, tenant_id, workspace_id, email, role, token_hash,
                                     invited_by, expires_at)
            VALUES (%s, %s, %s, %s, %s, %s, %s, %s) RETURNING {COLUMNS}""",
        (uuid7(), tenant_id, workspace_id, email, role, token_hash, invited_by, expires_at),
    )
    row = await cur.fetchone()
    assert row is not None
    return row


async def list_pending(conn: Conn, tenant_id: uuid.UUID) -> list[Row]:
    cur = await conn.execute(
        f"""SELECT {COLUMNS} FROM invitations WHERE tenant_id = %s AND accepted_at IS NULL
             ORDER BY created_at DESC""",
        (tenant_id,),
    )
    return list(await cur.fetchall())


async def delete_pending(conn: Conn, tenant_id: uuid.UUID, invitation_id: uuid.UUID) -> bool:
    cur = await conn.execute(
        """DELETE FROM invitations WHERE tenant_id = %s AND id = %s AND accepted_at IS NULL
           RETURNING id""",
        (tenant_id, invitation_id),
    )
    return await cur.fetchone() is not None


async def lookup(conn: Conn, token_hash: bytes) -> Row | None:
    """``(id, tenant_id)`` of the invitation with this hash, whatever its tenant."""
    cur = await conn.execute("SELECT id, tenant_id FROM lookup_invitation(%s)", (token_hash,))
    return await cur.fetchone()


async def lock(conn: Conn, tenant_id: uuid.UUID, invitation_id: uuid.UUID) -> Row | None:
    cur = await conn.execute(
        f"SELECT {COLUMNS}, token_hash FROM invitations WHERE tenant_id = %s AND id = %s"
        " FOR UPDATE",
        (tenant_id, invitation_id),
    )
    return await cur.fetchone()


async def mark_accepted(conn: Conn, tenant_id: uuid.UUID, invitation_id: uuid.UUID) -> None:
    await conn.execute(
        "UPDATE invitations SET accepted_at = now() WHERE tenant_id = %s AND id = %s",
        (tenant_id, invitation_id),
    )


async def email_is_user(conn: Conn, tenant_id: uuid.UUID, email: str) -> bool:
    cur = await conn.execute(
        "SELECT 1 FROM users WHERE tenant_id = %s AND lower(email) = lower(%s)", (tenant_id, email)
    )
    return await cur.fetchone() is not None
