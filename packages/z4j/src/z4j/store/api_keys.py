"""API keys: found by the HMAC of the bearer token on every API request that carries one."""

from __future__ import annotations

import uuid
from typing import Any

from platformkit.db.scope import Conn
from platformkit.ids import uuid7

_COLUMNS = (
    "k.id, k.user_id, k.project_id, k.name, k.role::text AS role, k.prefix, k.last_used_at, "
    "k.revoked_at, k.created_at"
)


async def create(
    conn: Conn,
    user_id: uuid.UUID,
    project_id: uuid.UUID,
    name: str,
    role: str,
    token_hash: str,
    prefix: str,
) -> dict[str, Any]:
    cur = await conn.execute(
        "INSERT INTO api_keys AS k (id, user_id, project_id, name, role, token_hash, prefix) "
        f"VALUES (%s, %s, %s, %s, %s, %s, %s) RETURNING {_COLUMNS}",
        (uuid7(), user_id, project_id, name, role, token_hash, prefix),
    )
    row = await cur.fetchone()
    if row is None:  # INSERT ... RETURNING always returns the row
        raise RuntimeError("api key insert returned nothing")
    return row


async def list_for_user(conn: Conn, user_id: uuid.UUID) -> list[dict[str, Any]]:
    """The user's keys in every project (platform scope), newest first, with project names."""
    cur = await conn.execute(
        f"SELECT {_COLUMNS}, p.name AS project_name FROM api_keys k "
        "JOIN projects p ON p.id = k.project_id WHERE k.user_id = %s "
        "ORDER BY k.created_at DESC",
        (user_id,),
    )
    return await cur.fetchall()


async def revoke(conn: Conn, user_id: uuid.UUID, key_id: uuid.UUID) -> dict[str, Any] | None:
    cur = await conn.execute(
        "UPDATE api_keys AS k SET revoked_at = now() "
        f"WHERE id = %s AND user_id = %s AND revoked_at IS NULL RETURNING {_COLUMNS}",
        (key_id, user_id),
    )
    return await cur.fetchone()


async def find_live(conn: Conn, token_hash: str) -> dict[str, Any] | None:
    """The unrevoked key of ``token_hash`` and its owner, who must be active."""
    cur = await conn.execute(
        f"SELECT {_COLUMNS}, u.email, u.display_name, u.is_admin FROM api_keys k "
        "JOIN users u ON u.id = k.user_id "
        "WHERE k.token_hash = %s AND k.revoked_at IS NULL AND u.is_active",
        (token_hash,),
    )
    return await cur.fetchone()


async def touch(conn: Conn, key_id: uuid.UUID) -> None:
    """Record a use; at most one write a minute per key."""
    await conn.execute(
        "UPDATE api_keys SET last_used_at = now() WHERE id = %s "
        "AND (last_used_at IS NULL OR last_used_at < now() - interval '1 minute')",
        (key_id,),
    )
