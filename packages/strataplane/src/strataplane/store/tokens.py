"""api_token: bearer tokens of users and service accounts; only sha256(token) is stored.

``tenant_id`` NULL is a platform token of a platform admin. ``lookup`` runs in platform scope:
the hash is how a request finds its tenant.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from uuid import UUID

from platformkit.db.scope import Conn

from strataplane.store.rows import maybe, one

_COLUMNS = (
    "id, tenant_id, name, token_prefix, user_id, roles::text[] AS roles, expires_at, "
    "last_used_at, created_at, revoked_at"
)


@dataclass(frozen=True)
class ApiToken:
    id: UUID
    tenant_id: UUID | None
    name: str
    token_prefix: str
    user_id: UUID
    roles: list[str] | None
    expires_at: datetime | None
    last_used_at: datetime | None
    created_at: datetime
    revoked_at: datetime | None


async def insert_token(
    conn: Conn,
    token_id: UUID,
    *,
    tenant_id: UUID | None,
    user_id: UUID,
    name: str,
    prefix: str,
    token_hash: bytes,
    roles: list[str] | None,
    expires_at: datetime | None,
) -> ApiToken:
    cur = await conn.execute(
        "INSERT INTO api_token (id, tenant_id, name, token_prefix, token_hash, user_id, roles, "
        f"expires_at) VALUES (%s, %s, %s, %s, %s, %s, %s::role_name[], %s) RETURNING {_COLUMNS}",
        (token_id, tenant_id, name, prefix, token_hash, user_id, roles, expires_at),
    )
    return ApiToken(**await one(cur))


async def get_token(conn: Conn, tenant_id: UUID | None, token_id: UUID) -> ApiToken | None:
    cur = await conn.execute(
        f"SELECT {_COLUMNS} FROM api_token WHERE tenant_id IS NOT DISTINCT FROM %s AND id = %s",
        (tenant_id, token_id),
    )
    row = await maybe(cur)
    return ApiToken(**row) if row is not None else None


async def list_tokens(conn: Conn, tenant_id: UUID | None, user_id: UUID | None) -> list[ApiToken]:
    """Tokens of the tenant (platform tokens for None), of one user unless ``user_id`` is
    None."""
    cur = await conn.execute(
        f"SELECT {_COLUMNS} FROM api_token WHERE tenant_id IS NOT DISTINCT FROM %(t)s "
        "AND (%(u)s::uuid IS NULL OR user_id = %(u)s) ORDER BY created_at DESC, id",
        {"t": tenant_id, "u": user_id},
    )
    return [ApiToken(**row) for row in await cur.fetchall()]


async def revoke_token(conn: Conn, tenant_id: UUID | None, token_id: UUID) -> ApiToken | None:
    cur = await conn.execute(
        "UPDATE api_token SET revoked_at = coalesce(revoked_at, now()) "
        f"WHERE tenant_id IS NOT DISTINCT FROM %s AND id = %s RETURNING {_COLUMNS}",
        (tenant_id, token_id),
    )
    row = await maybe(cur)
    return ApiToken(**row) if row is not None else None


async def lookup(conn: Conn, token_hash: bytes) -> ApiToken | None:
    """By hash, across tenants: call in platform scope."""
    cur = await conn.execute(
        f"SELECT {_COLUMNS} FROM api_token WHERE token_hash = %s", (token_hash,)
    )
    row = await maybe(cur)
    return ApiToken(**row) if row is not None else None


async def touch(conn: Conn, token_id: UUID, min_interval_seconds: int) -> None:
    """Record use, at most once per interval, so a busy token is not a write per request."""
    await conn.execute(
        "UPDATE api_token SET last_used_at = now() WHERE id = %s AND (last_used_at IS NULL "
        "OR last_used_at < now() - make_interval(secs => %s))",
        (token_id, min_interval_seconds),
    )
