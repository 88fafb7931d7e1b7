"""Invitations: a role in a project offered to an email, accepted once within 72 hours.

Only the HMAC-SHA256 of the token is stored (``token_hash``); the token itself is in the mail.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from platformkit.db.scope import Conn
from platformkit.ids import uuid7

_COLUMNS = (
    "i.id, i.project_id, i.email, i.role::text AS role, i.expires_at, i.accepted_at, "
    "i.created_by, i.created_at"
)


async def replace_pending(
    conn: Conn,
    project_id: uuid.UUID,
    email: str,
    role: str,
    token_hash: str,
    expires_at: datetime,
    created_by: uuid.UUID,
) -> dict[str, Any]:
    """Create an invitation; a pending one to the same email in the project is replaced, so
    only the newest link works."""
    await conn.execute(
        "DELETE FROM invitations WHERE project_id = %s AND email = %s AND accepted_at IS NULL",
        (project_id, email),
    )
    cur = await conn.execute(
        "INSERT INTO invitations AS i (id, project_id, email, role, token_hash, expires_at, "
        "created_by) VALUES (%s, %s, %s, %s, %s, %s, %s) "
        f"RETURNING {_COLUMNS}",
        (uuid7(), project_id, email, role, token_hash, expires_at, created_by),
    )
    row = await cur.fetchone()
    if row is None:  # INSERT ... RETURNING always returns the row
        raise RuntimeError("invitation insert returned nothing")
    return row


async def list_pending(conn: Conn, project_id: uuid.UUID) -> list[dict[str, Any]]:
    cur = await conn.execute(
        f"SELECT {_COLUMNS}, u.email AS created_by_email FROM invitations i "
        "LEFT JOIN users u ON u.id = i.created_by "
        "WHERE i.project_id = %s AND i.accepted_at IS NULL AND i.expires_at > now() "
        "ORDER BY i.created_at DESC",
        (project_id,),
    )
    return await cur.fetchall()


async def revoke(conn: Conn, project_id: uuid.UUID, invitation_id: uuid.UUID) -> bool:
    cur = await conn.execute(
        "DELETE FROM invitations WHERE id = %s AND project_id = %s AND accepted_at IS NULL",
        (invitation_id, project_id),
    )
    return cur.rowcount == 1


async def find_pending(conn: Conn, token_hash: str) -> dict[str, Any] | None:
    """The pending invitation of a token, with its project's name; None when the token is
    unknown, used or expired."""
    cur = await conn.execute(
        f"SELECT {_COLUMNS}, p.name AS project_name FROM invitations i "
        "JOIN projects p ON p.id = i.project_id "
        "WHERE i.token_hash = %s AND i.accepted_at IS NULL AND i.expires_at > now()",
        (token_hash,),
    )
    return await cur.fetchone()


async def take(conn: Conn, token_hash: str) -> dict[str, Any] | None:
    """Mark the token's pending invitation accepted and return it; a second call (or a
    concurrent one) gets None."""
    cur = await conn.execute(
        "UPDATE invitations AS i SET accepted_at = now() "
        "WHERE token_hash = %s AND accepted_at IS NULL AND expires_at > now() "
        f"RETURNING {_COLUMNS}",
        (token_hash,),
    )
    return await cur.fetchone()
