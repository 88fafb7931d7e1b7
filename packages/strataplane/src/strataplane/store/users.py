"""app_user: installation-wide identities (local, OIDC and service accounts)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from uuid import UUID

from platformkit.db.scope import Conn

from strataplane.store.rows import maybe, one

_COLUMNS = (
    "id, kind, issuer, subject, email, display_name, platform_admin, created_at, "
    "last_login_at, disabled_at"
)
LOCAL = "local"
SERVICE = "service"


@dataclass(frozen=True)
class User:
    id: UUID
    kind: str
    issuer: str
    subject: str
    email: str | None
    display_name: str
    platform_admin: bool
    created_at: datetime
    last_login_at: datetime | None
    disabled_at: datetime | None


async def insert_user(
    conn: Conn,
    user_id: UUID,
    *,
    kind: str,
    issuer: str,
    subject: str,
    display_name: str,
    email: str | None = None,
    password_hash: str | None = None,
    platform_admin: bool = False,
) -> User:
    cur = await conn.execute(
        "INSERT INTO app_user (id, kind, issuer, subject, email, display_name, password_hash, "
        f"platform_admin) VALUES (%s, %s, %s, %s, %s, %s, %s, %s) RETURNING {_COLUMNS}",
        (user_id, kind, issuer, subject, email, display_name, password_hash, platform_admin),
    )
    return User(**await one(cur))


async def get_user(conn: Conn, user_id: UUID) -> User | None:
    row = await maybe(
        await conn.execute(f"SELECT {_COLUMNS} FROM app_user WHERE id = %s", (user_id,))
    )
    return User(**row) if row is not None else None


async def get_local_login(conn: Conn, username: str) -> tuple[User, str | None] | None:
    """A local user by username, with the stored password hash (for the login path only)."""
    cur = await conn.execute(
        f"SELECT {_COLUMNS}, password_hash FROM app_user WHERE issuer = %s AND subject = %s",
        (LOCAL, username),
    )
    row = await maybe(cur)
    if row is None:
        return None
    password_hash = row.pop("password_hash")
    return User(**row), password_hash


async def find_people(conn: Conn, login: str) -> list[User]:
    """People whose local username is ``login``, or whose email is (ignoring case)."""
    cur = await conn.execute(
        f"SELECT {_COLUMNS} FROM app_user WHERE kind = 'human'"
        " AND ((issuer = %s AND subject = %s) OR lower(email) = lower(%s)) LIMIT 2",
        (LOCAL, login, login),
    )
    return [User(**row) for row in await cur.fetchall()]


async def upsert_external(
    conn: Conn, user_id: UUID, *, issuer: str, subject: str, display_name: str, email: str | None
) -> tuple[User, bool]:
    """The human user of an OIDC identity (issuer, subject), created at its first login; its
    name and email follow the provider's at every login. True: created now."""
    cur = await conn.execute(
        "INSERT INTO app_user AS u (id, kind, issuer, subject, email, display_name, "
        "last_login_at) VALUES (%s, 'human', %s, %s, %s, %s, now()) "
        "ON CONFLICT (issuer, subject) DO UPDATE SET email = EXCLUDED.email, "
        "display_name = EXCLUDED.display_name, last_login_at = now() "
        f"RETURNING {_COLUMNS}, (xmax = 0) AS created",
        (user_id, issuer, subject, email, display_name),
    )
    row = await one(cur)
    created = bool(row.pop("created"))
    return User(**row), created


async def list_users(conn: Conn, *, after: UUID | None, limit: int) -> list[User]:
    cur = await conn.execute(
        f"SELECT {_COLUMNS} FROM app_user WHERE kind = 'human' "
        "AND (%(after)s::uuid IS NULL OR id > %(after)s) ORDER BY id LIMIT %(limit)s",
        {"after": after, "limit": limit},
    )
    return [User(**row) for row in await cur.fetchall()]


async def set_password_hash(conn: Conn, user_id: UUID, password_hash: str) -> None:
    await conn.execute(
        "UPDATE app_user SET password_hash = %s WHERE id = %s", (password_hash, user_id)
    )


async def touch_login(conn: Conn, user_id: UUID) -> None:
    await conn.execute("UPDATE app_user SET last_login_at = now() WHERE id = %s", (user_id,))


async def set_disabled(conn: Conn, user_id: UUID, disabled: bool) -> User | None:
    cur = await conn.execute(
        "UPDATE app_user SET disabled_at = CASE WHEN %s THEN coalesce(disabled_at, now()) END "
        f"WHERE id = %s RETURNING {_COLUMNS}",
        (disabled, user_id),
    )
    row = await maybe(cur)
    return User(**row) if row is not None else None


async def delete_user(conn: Conn, user_id: UUID) -> int:
    cur = await conn.execute("DELETE FROM app_user WHERE id = %s", (user_id,))
    return cur.rowcount
