"""Two-factor enrolment and recovery codes (brain-wide, like users)."""

from __future__ import annotations

import uuid
from typing import Any

from platformkit.db.scope import Conn
from platformkit.ids import uuid7


async def get(conn: Conn, user_id: uuid.UUID, *, lock: bool = False) -> dict[str, Any] | None:
    suffix = " FOR UPDATE" if lock else ""
    cur = await conn.execute(
        "SELECT user_id, secret, confirmed_at, last_step, created_at FROM user_mfa "
        f"WHERE user_id = %s{suffix}",
        (user_id,),
    )
    return await cur.fetchone()


async def enabled(conn: Conn, user_id: uuid.UUID) -> bool:
    cur = await conn.execute(
        "SELECT EXISTS (SELECT 1 FROM user_mfa WHERE user_id = %s AND confirmed_at IS NOT NULL) "
        "AS found",
        (user_id,),
    )
    row = await cur.fetchone()
    return bool(row and row["found"])


async def start(conn: Conn, user_id: uuid.UUID, sealed: bytes) -> None:
    """A new unconfirmed enrolment, replacing an earlier unconfirmed one."""
    await conn.execute(
        "INSERT INTO user_mfa (user_id, secret) VALUES (%s, %s) ON CONFLICT (user_id) DO "
        "UPDATE SET secret = excluded.secret, created_at = now(), last_step = NULL "
        "WHERE user_mfa.confirmed_at IS NULL",
        (user_id, sealed),
    )


async def accept_step(conn: Conn, user_id: uuid.UUID, step: int, *, confirm: bool) -> bool:
    """Record an accepted code's step (and confirm the enrolment); False if a newer or equal
    step was accepted meanwhile (the same code twice)."""
    confirm_sql = ", confirmed_at = coalesce(confirmed_at, now())" if confirm else ""
    cur = await conn.execute(
        f"UPDATE user_mfa SET last_step = %s{confirm_sql} "
        "WHERE user_id = %s AND (last_step IS NULL OR last_step < %s)",
        (step, user_id, step),
    )
    return cur.rowcount == 1


async def remove(conn: Conn, user_id: uuid.UUID) -> None:
    await conn.execute("DELETE FROM user_mfa WHERE user_id = %s", (user_id,))
    await conn.execute("DELETE FROM mfa_recovery_codes WHERE user_id = %s", (user_id,))


async def replace_recovery_codes(conn: Conn, user_id: uuid.UUID, hashes: list[str]) -> None:
    await conn.execute("DELETE FROM mfa_recovery_codes WHERE user_id = %s", (user_id,))
    for code_hash in hashes:
        await conn.execute(
            "INSERT INTO mfa_recovery_codes (id, user_id, code_hash) VALUES (%s, %s, %s)",
            (uuid7(), user_id, code_hash),
        )


async def use_recovery_code(conn: Conn, user_id: uuid.UUID, code_hash: str) -> uuid.UUID | None:
    cur = await conn.execute(
        "UPDATE mfa_recovery_codes SET used_at = now() "
        "WHERE user_id = %s AND code_hash = %s AND used_at IS NULL RETURNING id",
        (user_id, code_hash),
    )
    row = await cur.fetchone()
    return row["id"] if row is not None else None


async def recovery_left(conn: Conn, user_id: uuid.UUID) -> int:
    cur = await conn.execute(
        "SELECT count(*) AS left FROM mfa_recovery_codes WHERE user_id = %s AND used_at IS NULL",
        (user_id,),
    )
    row = await cur.fetchone()
    return int(row["left"]) if row else 0
