"""Users: brain-wide accounts, found by normalized email (no tenant: users span projects)."""

from __future__ import annotations

import uuid
from typing import Any

from platformkit.db.scope import Conn
from platformkit.ids import uuid7

_COLUMNS = "id, email, display_name, password_hash, is_active, is_admin, created_at"


def normalize_email(email: str) -> str:
    return email.strip().lower()


async def any_exist(conn: Conn) -> bool:
    cur = await conn.execute("SELECT EXISTS (SELECT 1 FROM users) AS found")
    row = await cur.fetchone()
    return bool(row and row["found"])


async def get(conn: Conn, user_id: uuid.UUID) -> dict[str, Any] | None:
    cur = await conn.execute(f"SELECT {_COLUMNS} FROM users WHERE id = %s", (user_id,))
    return await cur.fetchone()


async def get_by_email(conn: Conn, email: str) -> dict[str, Any] | None:
    cur = await conn.execute(
        f"SELECT {_COLUMNS} FROM users WHERE email = %s", (normalize_email(email),)
    )
    return await cur.fetchone()


async def create(
    conn: Conn,
    email: str,
    password_hash: str,
    *,
    is_admin: bool = False,
    display_name: str | None = None,
) -> dict[str, Any] | None:
    """Insert a user; None when the email is taken (no exception, so the caller's transaction
    stays usable)."""
    cur = await conn.execute(
        f"INSERT INTO users (id, email, display_name, password_hash, is_admin) "
        f"VALUES (%s, %s, %s, %s, %s) ON CONFLICT (email) DO NOTHING RETURNING {_COLUMNS}",
        (uuid7(), normalize_email(email), display_name, password_hash, is_admin),
    )
    return await cur.fetchone()


async def set_password_hash(conn: Conn, user_id: uuid.UUID, password_hash: str) -> None:
    await conn.execute(
        "UPDATE users SET password_hash = %s, updated_at = now() WHERE id = %s",
        (password_hash, user_id),
    )
