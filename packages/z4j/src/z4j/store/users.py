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


_SUMMARY = (
    "SELECT u.id, u.email, u.display_name, u.is_active, u.is_admin, u.created_at, "
    "(SELECT count(*) FROM memberships m WHERE m.user_id = u.id) AS projects FROM users u"
)


async def list_all(conn: Conn) -> list[dict[str, Any]]:
    """Every account with how many projects it belongs to, by email."""
    cur = await conn.execute(_SUMMARY + " ORDER BY u.email")
    return await cur.fetchall()


async def summary(conn: Conn, user_id: uuid.UUID) -> dict[str, Any] | None:
    cur = await conn.execute(_SUMMARY + " WHERE u.id = %s", (user_id,))
    return await cur.fetchone()


async def lock(conn: Conn, user_id: uuid.UUID) -> dict[str, Any] | None:
    cur = await conn.execute(f"SELECT {_COLUMNS} FROM users WHERE id = %s FOR UPDATE", (user_id,))
    return await cur.fetchone()


async def active_admins(conn: Conn) -> int:
    """Active brain administrators, their rows locked (two admins disabling each other at once
    cannot both succeed)."""
    cur = await conn.execute(
        "SELECT id FROM users WHERE is_admin AND is_active ORDER BY id FOR UPDATE"
    )
    return len(await cur.fetchall())


async def set_active(conn: Conn, user_id: uuid.UUID, active: bool) -> None:
    await conn.execute(
        "UPDATE users SET is_active = %s, updated_at = now() WHERE id = %s", (active, user_id)
    )
