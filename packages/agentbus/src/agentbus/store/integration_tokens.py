"""integration_tokens: long-lived bearer tokens ``ab_live_<40>`` / ``ab_test_<40>`` (04 §1.2).

Only SHA-256(plaintext) is stored, with ``prefix`` (``ab_live_`` + 6 characters) and ``last4``
for display. ``verify_integration_token`` is the gateway's check: format first (no database
work for garbage), then the one lookup that runs before the tenant is known, through the
``lookup_integration_token`` function, then revoked, expired, tenant status, in that order.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from platformkit.db.scope import Conn, Pool, tenant_transaction, transaction
from platformkit.tokens import TokenFormat

from agentbus.db import SCOPE
from agentbus.errors import TenantSuspended, TokenExpired, TokenInvalid, TokenRevoked

Row = dict[str, Any]

TOKEN_FORMATS = {
    env: TokenFormat.from_alphabet(f"ab_{env}_", length=40, display_length=6)
    for env in ("live", "test")
}
SCOPES = ("send", "receive", "register", "read_audit", "admin")
DEFAULT_SCOPES = ("send", "receive", "register")
TOUCH_EVERY = timedelta(minutes=1)

# Never the hash: listing and reading a token shows its prefix and last four characters only.
COLUMNS = """id, tenant_id, workspace_id, owner_user_id, name, env, prefix, last4, scopes,
    expires_at, last_used_at, host(last_used_ip) AS last_used_ip, revoked_at, revoked_reason,
    created_at"""


def token_hash(plaintext: str) -> bytes:
    return hashlib.sha256(plaintext.encode()).digest()


async def insert_token(
    conn: Conn,
    tenant_id: uuid.UUID,
    *,
    token_id: uuid.UUID,
    owner_user_id: uuid.UUID,
    workspace_id: uuid.UUID | None,
    name: str,
    env: str,
    hashed: bytes,
    prefix: str,
    last4: str,
    scopes: Sequence[str],
    expires_at: datetime | None,
) -> Row:
    cur = await conn.execute(
        f"""INSERT INTO integration_tokens (id, tenant_id, workspace_id, owner_user_id, name, env,
                token_hash, prefix, last4, scopes, expires_at)
            VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s) RETURNING {COLUMNS}""",
        (
            token_id,
            tenant_id,
            workspace_id,
            owner_user_id,
            name,
            env,
            hashed,
            prefix,
            last4,
            list(scopes),
            expires_at,
        ),
    )
    row = await cur.fetchone()
    assert row is not None
    return row


async def get_token(conn: Conn, tenant_id: uuid.UUID, token_id: uuid.UUID) -> Row | None:
    cur = await conn.execute(
        f"SELECT {COLUMNS} FROM integration_tokens WHERE tenant_id = %s AND id = %s",
        (tenant_id, token_id),
    )
    return await cur.fetchone()


async def list_tokens(
    conn: Conn,
    tenant_id: uuid.UUID,
    *,
    owner_user_id: uuid.UUID | None = None,
    include_revoked: bool = False,
) -> list[Row]:
    cur = await conn.execute(
        f"""SELECT {COLUMNS} FROM integration_tokens
            WHERE tenant_id = %(t)s AND (%(o)s::uuid IS NULL OR owner_user_id = %(o)s)
              AND (%(r)s OR revoked_at IS NULL)
            ORDER BY id""",
        {"t": tenant_id, "o": owner_user_id, "r": include_revoked},
    )
    return await cur.fetchall()


async def revoke_token(
    conn: Conn, tenant_id: uuid.UUID, token_id: uuid.UUID, reason: str | None
) -> Row | None:
    """Set ``revoked_at`` once; None when absent or already revoked."""
    cur = await conn.execute(
        f"""UPDATE integration_tokens SET revoked_at = now(), revoked_reason = %s
            WHERE tenant_id = %s AND id = %s AND revoked_at IS NULL RETURNING {COLUMNS}""",
        (reason, tenant_id, token_id),
    )
    return await cur.fetchone()


async def revoke_all(conn: Conn, tenant_id: uuid.UUID, reason: str) -> int:
    """Revoke every token of the tenant still in force; how many."""
    cur = await conn.execute(
        """UPDATE integration_tokens SET revoked_at = now(), revoked_reason = %s
            WHERE tenant_id = %s AND revoked_at IS NULL""",
        (reason, tenant_id),
    )
    return cur.rowcount


async def lookup_token(conn: Conn, hashed: bytes) -> Row | None:
    """No tenant scope needed: the narrow lookup function reads across tenants by hash only."""
    cur = await conn.execute("SELECT * FROM lookup_integration_token(%s)", (hashed,))
    return await cur.fetchone()


async def touch_token(
    conn: Conn, tenant_id: uuid.UUID, token_id: uuid.UUID, ip: str | None, at: datetime
) -> None:
    """Record use, at most once per ``TOUCH_EVERY`` per token."""
    await conn.execute(
        """UPDATE integration_tokens SET last_used_at = %s, last_used_ip = %s
           WHERE tenant_id = %s AND id = %s
             AND (last_used_at IS NULL OR last_used_at < %s - %s::interval)""",
        (at, ip, tenant_id, token_id, at, TOUCH_EVERY),
    )


@dataclass(frozen=True)
class VerifiedToken:
    token_id: uuid.UUID
    tenant_id: uuid.UUID
    workspace_id: uuid.UUID | None
    owner_user_id: uuid.UUID
    env: str
    scopes: frozenset[str]
    expires_at: datetime | None


async def verify_integration_token(
    pool: Pool, plaintext: str, *, ip: str | None = None, now: datetime | None = None
) -> VerifiedToken:
    """The token behind ``plaintext``, or AB-1002/1003/1004/1013 (04-API-SPEC §1.2)."""
    if not any(fmt.matches(plaintext) for fmt in TOKEN_FORMATS.values()):
        raise TokenInvalid("not an AgentBus integration token")
    now = now or datetime.now(UTC)
    async with transaction(pool) as conn:
        row = await lookup_token(conn, token_hash(plaintext))
    if row is None:
        raise TokenInvalid("unknown integration token")
    if row["revoked_at"] is not None:
        raise TokenRevoked()
    if row["expires_at"] is not None and row["expires_at"] <= now:
        raise TokenExpired()
    if row["tenant_status"] != "active":
        raise TenantSuspended(tenant_status=row["tenant_status"])
    if row["last_used_at"] is None or row["last_used_at"] < now - TOUCH_EVERY:
        async with tenant_transaction(pool, SCOPE, row["tenant_id"]) as conn:
            await touch_token(conn, row["tenant_id"], row["id"], ip, now)
    return VerifiedToken(
        token_id=row["id"],
        tenant_id=row["tenant_id"],
        workspace_id=row["workspace_id"],
        owner_user_id=row["owner_user_id"],
        env=row["env"],
        scopes=frozenset(row["scopes"]),
        expires_at=row["expires_at"],
    )
