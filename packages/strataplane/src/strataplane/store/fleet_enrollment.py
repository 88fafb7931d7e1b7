"""enrollment_token: tokens that enroll agents into a tenant; only sha256(token) is stored.

``lookup`` runs in platform scope: the token's hash names the tenant an agent enrolls into.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

from platformkit.db.scope import Conn
from psycopg.types.json import Jsonb

from strataplane.store.rows import maybe, one

_COLUMNS = (
    "id, tenant_id, name, agent_kind::text AS agent_kind, token_prefix, labels, "
    "host_kind::text AS host_kind, mode, requires_approval, max_uses, uses, expires_at, "
    "created_by, created_at, revoked_at"
)


@dataclass(frozen=True)
class EnrollmentToken:
    id: UUID
    tenant_id: UUID
    name: str
    agent_kind: str
    token_prefix: str
    labels: dict[str, Any]
    host_kind: str
    mode: str
    requires_approval: bool
    max_uses: int | None
    uses: int
    expires_at: datetime | None
    created_by: UUID | None
    created_at: datetime
    revoked_at: datetime | None


async def insert_token(
    conn: Conn, token_id: UUID, tenant_id: UUID, *, token_hash: bytes, **fields: Any
) -> EnrollmentToken:
    cur = await conn.execute(
        "INSERT INTO enrollment_token (id, tenant_id, name, agent_kind, token_prefix, "
        "token_hash, labels, host_kind, mode, requires_approval, max_uses, expires_at, "
        "created_by) VALUES (%(id)s, %(t)s, %(name)s, %(agent_kind)s, %(token_prefix)s, "
        "%(hash)s, %(labels)s, %(host_kind)s, %(mode)s, %(requires_approval)s, %(max_uses)s, "
        f"%(expires_at)s, %(created_by)s) RETURNING {_COLUMNS}",
        {
            **fields,
            "id": token_id,
            "t": tenant_id,
            "hash": token_hash,
            "labels": Jsonb(fields["labels"]),
        },
    )
    return EnrollmentToken(**await one(cur))


async def get_token(conn: Conn, tenant_id: UUID, token_id: UUID) -> EnrollmentToken | None:
    cur = await conn.execute(
        f"SELECT {_COLUMNS} FROM enrollment_token WHERE tenant_id = %s AND id = %s",
        (tenant_id, token_id),
    )
    row = await maybe(cur)
    return EnrollmentToken(**row) if row is not None else None


async def list_tokens(conn: Conn, tenant_id: UUID) -> list[EnrollmentToken]:
    cur = await conn.execute(
        f"SELECT {_COLUMNS} FROM enrollment_token WHERE tenant_id = %s ORDER BY created_at, id",
        (tenant_id,),
    )
    return [EnrollmentToken(**r) for r in await cur.fetchall()]


async def revoke_token(conn: Conn, tenant_id: UUID, token_id: UUID) -> EnrollmentToken | None:
    cur = await conn.execute(
        "UPDATE enrollment_token SET revoked_at = coalesce(revoked_at, now()) "
        f"WHERE tenant_id = %s AND id = %s RETURNING {_COLUMNS}",
        (tenant_id, token_id),
    )
    row = await maybe(cur)
    return EnrollmentToken(**row) if row is not None else None


async def hash_of(conn: Conn, tenant_id: UUID, token_id: UUID) -> bytes | None:
    cur = await conn.execute(
        "SELECT token_hash FROM enrollment_token WHERE tenant_id = %s AND id = %s",
        (tenant_id, token_id),
    )
    row = await maybe(cur)
    return bytes(row["token_hash"]) if row is not None else None


async def lookup(conn: Conn, token_hash: bytes) -> EnrollmentToken | None:
    """By hash, across tenants: call in platform scope."""
    cur = await conn.execute(
        f"SELECT {_COLUMNS} FROM enrollment_token WHERE token_hash = %s", (token_hash,)
    )
    row = await maybe(cur)
    return EnrollmentToken(**row) if row is not None else None


async def take_use(conn: Conn, tenant_id: UUID, token_id: UUID) -> bool:
    """Count one use; False when the token is revoked, expired or used up (row locked)."""
    cur = await conn.execute(
        "UPDATE enrollment_token SET uses = uses + 1 WHERE tenant_id = %s AND id = %s "
        "AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > now()) "
        "AND (max_uses IS NULL OR uses < max_uses) RETURNING uses",
        (tenant_id, token_id),
    )
    return await cur.fetchone() is not None
