"""Dashboard sessions: one row per login, read by primary key on every request.

``data`` holds ``secret_hash``, the HMAC of the random half of the cookie; the cookie's other
half is the row id. The plaintext secret exists only in the browser's cookie.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from platformkit.db.scope import Conn
from psycopg.types.json import Jsonb


async def create(
    conn: Conn,
    session_id: uuid.UUID,
    user_id: uuid.UUID,
    expires_at: datetime,
    data: dict[str, Any],
) -> None:
    await conn.execute(
        "INSERT INTO sessions (id, user_id, expires_at, data) VALUES (%s, %s, %s, %s)",
        (session_id, user_id, expires_at, Jsonb(data)),
    )


async def get_live_with_user(conn: Conn, session_id: uuid.UUID) -> dict[str, Any] | None:
    """The unexpired session and its (active) user, in one round trip."""
    cur = await conn.execute(
        "SELECT s.id AS session_id, s.expires_at, s.data, s.created_at AS session_created_at, "
        "u.id, u.email, u.display_name, u.is_admin "
        "FROM sessions s JOIN users u ON u.id = s.user_id "
        "WHERE s.id = %s AND s.expires_at > now() AND u.is_active",
        (session_id,),
    )
    return await cur.fetchone()


async def extend(conn: Conn, session_id: uuid.UUID, expires_at: datetime) -> None:
    await conn.execute(
        "UPDATE sessions SET expires_at = %s WHERE id = %s", (expires_at, session_id)
    )


async def delete(conn: Conn, session_id: uuid.UUID) -> bool:
    cur = await conn.execute("DELETE FROM sessions WHERE id = %s", (session_id,))
    return cur.rowcount > 0


async def delete_expired_for_user(conn: Conn, user_id: uuid.UUID) -> None:
    await conn.execute(
        "DELETE FROM sessions WHERE user_id = %s AND expires_at <= now()", (user_id,)
    )


async def delete_for_user(conn: Conn, user_id: uuid.UUID, *, keep: uuid.UUID | None = None) -> int:
    """End the user's sessions (all but ``keep``); how many ended."""
    cur = await conn.execute(
        "DELETE FROM sessions WHERE user_id = %s AND id IS DISTINCT FROM %s", (user_id, keep)
    )
    return cur.rowcount


async def promote(
    conn: Conn, session_id: uuid.UUID, expires_at: datetime, data: dict[str, Any]
) -> bool:
    """Turn a session waiting for its second factor into a full one."""
    cur = await conn.execute(
        "UPDATE sessions SET expires_at = %s, data = %s WHERE id = %s AND expires_at > now()",
        (expires_at, Jsonb(data), session_id),
    )
    return cur.rowcount == 1
