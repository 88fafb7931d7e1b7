"""oidc_login: an OIDC login between the redirect and the callback (migration 0090). Keyed by
the SHA-256 of its state; taken once, by the callback."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from platformkit.db.scope import Conn

from strataplane.store.rows import maybe

# A person has this long at the provider (typing a password, a second factor) to come back.
LIFETIME = timedelta(minutes=10)
_PURGE_BATCH = 100


@dataclass(frozen=True)
class PendingLogin:
    nonce: str
    code_verifier: str
    next_path: str


async def insert_login(
    conn: Conn, state_hash: str, nonce: str, code_verifier: str, next_path: str
) -> None:
    await conn.execute(
        "DELETE FROM oidc_login WHERE state_hash = ANY (ARRAY(SELECT state_hash FROM oidc_login "
        "WHERE expires_at <= now() LIMIT %s))",
        (_PURGE_BATCH,),
    )
    await conn.execute(
        "INSERT INTO oidc_login (state_hash, nonce, code_verifier, next_path, expires_at) "
        "VALUES (%s, %s, %s, %s, now() + %s)",
        (state_hash, nonce, code_verifier, next_path, LIFETIME),
    )


async def take_login(conn: Conn, state_hash: str) -> PendingLogin | None:
    """The login of this state if it has not expired; it is gone afterwards either way."""
    cur = await conn.execute(
        "DELETE FROM oidc_login WHERE state_hash = %s "
        "RETURNING nonce, code_verifier, next_path, expires_at > now() AS alive",
        (state_hash,),
    )
    row = await maybe(cur)
    if row is None or not row["alive"]:
        return None
    return PendingLogin(row["nonce"], row["code_verifier"], row["next_path"])
