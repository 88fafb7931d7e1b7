"""secret_key (the keyring's fingerprints, installation-wide) and tenant_key (each tenant's data
keys, wrapped under a keyring key): the platformkit ``DataKeyStore`` on a transaction.

A tenant's active data key is its newest one not retired. Ids are allocated under a per-tenant
transaction lock, so two first writes of a tenant cannot race to the same id.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from platformkit.crypto import StoredDataKey, TenantId, WrappedDataKey
from platformkit.db.scope import Conn

from strataplane.store.rows import maybe, one

_NONCE = 12


@dataclass(frozen=True)
class KeyRow:
    id: int
    fingerprint: bytes
    created_at: datetime
    exported_at: datetime | None
    retired_at: datetime | None


async def list_secret_keys(conn: Conn) -> list[KeyRow]:
    cur = await conn.execute(
        "SELECT id, fingerprint, created_at, exported_at, retired_at FROM secret_key ORDER BY id"
    )
    return [KeyRow(**{**r, "fingerprint": bytes(r["fingerprint"])}) for r in await cur.fetchall()]


async def insert_secret_key(conn: Conn, key_id: int, fingerprint: bytes) -> None:
    await conn.execute(
        "INSERT INTO secret_key (id, fingerprint) VALUES (%s, %s) ON CONFLICT (id) DO NOTHING",
        (key_id, fingerprint),
    )


async def retire_other_keys(conn: Conn, active_id: int) -> None:
    """Every key but the active one decrypts only (retired_at), until re-wrapping ends."""
    await conn.execute(
        "UPDATE secret_key SET retired_at = now() WHERE id <> %s AND retired_at IS NULL",
        (active_id,),
    )
    await conn.execute("UPDATE secret_key SET retired_at = NULL WHERE id = %s", (active_id,))


async def mark_exported(conn: Conn, key_ids: list[int]) -> None:
    await conn.execute("UPDATE secret_key SET exported_at = now() WHERE id = ANY(%s)", (key_ids,))


async def kek_usage(conn: Conn) -> dict[int, int]:
    """Deployment key id -> how many tenant data keys it wraps (platform scope)."""
    cur = await conn.execute("SELECT kek_id, count(*) AS n FROM tenant_key GROUP BY kek_id")
    return {int(r["kek_id"]): int(r["n"]) for r in await cur.fetchall()}


def _stored(row: dict[str, Any]) -> StoredDataKey:
    wrapped = bytes(row["nonce"]) + bytes(row["wrapped_key"])
    return StoredDataKey(int(row["id"]), WrappedDataKey(int(row["kek_id"]), wrapped))


class TenantKeyStore:
    """``DataKeyStore`` over tenant_key inside the caller's transaction."""

    def __init__(self, conn: Conn) -> None:
        self.conn = conn

    async def get_active(self, tenant_id: TenantId) -> StoredDataKey | None:
        cur = await self.conn.execute(
            "SELECT id, kek_id, nonce, wrapped_key FROM tenant_key WHERE tenant_id = %s "
            "AND retired_at IS NULL ORDER BY id DESC LIMIT 1",
            (tenant_id,),
        )
        row = await maybe(cur)
        return _stored(row) if row is not None else None

    async def get(self, tenant_id: TenantId, key_id: int) -> StoredDataKey | None:
        cur = await self.conn.execute(
            "SELECT id, kek_id, nonce, wrapped_key FROM tenant_key WHERE tenant_id = %s "
            "AND id = %s",
            (tenant_id, key_id),
        )
        row = await maybe(cur)
        return _stored(row) if row is not None else None

    async def put(self, tenant_id: TenantId, wrapped: WrappedDataKey) -> StoredDataKey:
        await self.conn.execute(
            "SELECT pg_advisory_xact_lock(hashtextextended('tenant_key:' || %s::text, 0))",
            (str(tenant_id),),
        )
        cur = await self.conn.execute(
            "INSERT INTO tenant_key (tenant_id, id, kek_id, nonce, wrapped_key) "
            "SELECT %(t)s, coalesce(max(id), 0) + 1, %(k)s, %(n)s, %(w)s FROM tenant_key "
            "WHERE tenant_id = %(t)s RETURNING id",
            {
                "t": tenant_id,
                "k": wrapped.kek_id,
                "n": wrapped.wrapped[:_NONCE],
                "w": wrapped.wrapped[_NONCE:],
            },
        )
        key_id = int((await one(cur))["id"])
        await self.conn.execute(
            "UPDATE tenant_key SET retired_at = now() WHERE tenant_id = %s AND id < %s "
            "AND retired_at IS NULL",
            (tenant_id, key_id),
        )
        return StoredDataKey(key_id, wrapped)

    async def delete(self, tenant_id: TenantId) -> None:
        await self.conn.execute("DELETE FROM tenant_key WHERE tenant_id = %s", (tenant_id,))

    async def all_ids(self, tenant_id: TenantId) -> list[int]:
        cur = await self.conn.execute(
            "SELECT id FROM tenant_key WHERE tenant_id = %s ORDER BY id", (tenant_id,)
        )
        return [int(r["id"]) for r in await cur.fetchall()]
