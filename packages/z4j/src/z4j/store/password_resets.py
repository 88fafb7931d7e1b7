"""Password reset tokens: one-time links valid 60 minutes; only the token's HMAC is stored."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from platformkit.db.scope import Conn
from platformkit.ids import uuid7


async def replace_pending(
    conn: Conn, user_id: uuid.UUID, token_hash: str, expires_at: datetime
) -> uuid.UUID:
    """Store a new token for ``user_id``; the user's earlier unused tokens stop working, so
    only the newest mail's link does."""
    await drop_pending(conn, user_id)
    token_id = uuid7()
    await conn.execute(
        "INSERT INTO password_reset_tokens (id, user_id, token_hash, expires_at) "
        "VALUES (%s, %s, %s, %s)",
        (token_id, user_id, token_hash, expires_at),
    )
    return token_id


async def recently_sent(conn: Conn, user_id: uuid.UUID, within_seconds: int) -> bool:
    """Whether a still-pending token of the user was made in the last ``within_seconds``."""
    cur = await conn.execute(
        "SELECT EXISTS (SELECT 1 FROM password_reset_tokens WHERE user_id = %s "
        "AND used_at IS NULL AND created_at > now() - make_interval(secs => %s)) AS found",
        (user_id, within_seconds),
    )
    row = await cur.fetchone()
    return bool(row and row["found"])


async def find_pending(conn: Conn, token_hash: str) -> dict[str, Any] | None:
    """The unused, unexpired token and its (active) user's email."""
    cur = await conn.execute(
        "SELECT t.id, t.user_id, t.expires_at, u.email FROM password_reset_tokens t "
        "JOIN users u ON u.id = t.user_id "
        "WHERE t.token_hash = %s AND t.used_at IS NULL AND t.expires_at > now() AND u.is_active",
        (token_hash,),
    )
    return await cur.fetchone()


async def take(conn: Conn, token_hash: str) -> dict[str, Any] | None:
    """Mark the token used and return it; a second (or concurrent) call gets None."""
    cur = await conn.execute(
        "UPDATE password_reset_tokens SET used_at = now() "
        "WHERE token_hash = %s AND used_at IS NULL AND expires_at > now() "
        "RETURNING id, user_id",
        (token_hash,),
    )
    return await cur.fetchone()


async def drop_pending(conn: Conn, user_id: uuid.UUID) -> None:
    await conn.execute(
        "DELETE FROM password_reset_tokens WHERE user_id = %s AND used_at IS NULL", (user_id,)
    )
