"""Tenant data keys on ``tenant_keys``: the kernel's envelope crypto wired to AgentBus's table.

The platform KEK of data model §5 is the deployment keyring (``platformkit.crypto.Keyring``, a
0600 file); a BYOK tenant's KEK is its own AWS KMS key (``agentbus.kms``). For a platform
tenant:

- ``tenants.kek_ref`` is ``kms://platform/deployment-keyring``;
- a ``tenant_keys`` row's ``kek_ref`` names the keyring key that wrapped it,
  ``kms://platform/deployment-keyring/<key id>``, with ``kek_provider = 'platform'``;
- ``version`` is the data key id the kernel carries into ciphertexts (``dek_version``).

``TenantKeyStore`` implements ``platformkit.crypto.DataKeyStore`` so ``Envelope`` can use it;
``add_tenant_key`` does the same inside a transaction the caller already holds (tenant create).

``TenantKeyStore`` keeps the rows it read for ``KEY_CACHE_TTL_S`` seconds per process, so the
send and delivery hot paths do not spend a database transaction per payload on the data key.
Changes made through this store (rotation, deletion) drop the tenant's entries at once; a change
made elsewhere (another process, the admin CLI) takes effect here within ``KEY_CACHE_TTL_S``:
after a tenant's keys are deleted, a process may still seal or open that tenant's payloads for
at most that long.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from platformkit.crypto import (
    Keyring,
    StoredDataKey,
    TenantId,
    WrappedDataKey,
    load_or_create_keyring,
    new_data_key,
)
from platformkit.db.scope import Conn, Pool, tenant_transaction

from agentbus.db import SCOPE, pipelined_transaction
from agentbus.gathered import Gathered
from agentbus.kms import PLATFORM_KEK, kek_id_of, kek_ref_for
from agentbus.store import tenant_keys, tenants

__all__ = [
    "KEY_CACHE_TTL_S",
    "PLATFORM_KEK",
    "TenantKeyStore",
    "add_tenant_key",
    "kek_id_of",
    "kek_ref_for",
    "load_or_create_keyring",
    "store_key",
    "store_wrapped_key",
]

KEY_CACHE_TTL_S = 2.0
_CACHE_MAX = 10000


Row = dict[str, Any]


def _stored(row: dict[str, object]) -> StoredDataKey:
    kek_ref, wrapped, version = row["kek_ref"], row["dek_wrapped"], row["version"]
    assert isinstance(kek_ref, str)
    assert isinstance(wrapped, bytes)
    assert isinstance(version, int)
    return StoredDataKey(version, WrappedDataKey(kek_id_of(kek_ref), wrapped))


async def store_key(
    conn: Conn, tenant_id: uuid.UUID, *, kek_ref: str, kek_provider: str, wrapped: bytes
) -> dict[str, Any]:
    """Store ``wrapped`` as the tenant's next version, active, and retire the previous one
    (data model §5.3). The tenant row is locked first so two rotations never share a version."""
    await tenants.lock_tenant(conn, tenant_id)
    version = await tenant_keys.next_version(conn, tenant_id)
    await tenant_keys.retire_active(conn, tenant_id)
    return await tenant_keys.insert_key(
        conn, tenant_id, version, dek_wrapped=wrapped, kek_ref=kek_ref, kek_provider=kek_provider
    )


async def store_wrapped_key(
    conn: Conn, tenant_id: uuid.UUID, wrapped: WrappedDataKey
) -> StoredDataKey:
    """``store_key`` for a key wrapped by the deployment keyring."""
    row = await store_key(
        conn, tenant_id, kek_ref=kek_ref_for(wrapped.kek_id), kek_provider="platform",
        wrapped=wrapped.wrapped,
    )  # fmt: skip
    return _stored(row)


async def add_tenant_key(conn: Conn, keyring: Keyring, tenant_id: uuid.UUID) -> StoredDataKey:
    """A new data key wrapped under the keyring's active key; inside the tenant's transaction."""
    return await store_wrapped_key(conn, tenant_id, new_data_key(keyring, tenant_id))


def _uuid(tenant_id: TenantId) -> uuid.UUID:
    return tenant_id if isinstance(tenant_id, uuid.UUID) else uuid.UUID(tenant_id)


class TenantKeyStore:
    """``DataKeyStore`` over ``tenant_keys``, each read in its own tenant transaction, answers
    kept for ``ttl_s`` seconds (see the module docstring)."""

    def __init__(self, pool: Pool, *, ttl_s: float = KEY_CACHE_TTL_S) -> None:
        self._pool = pool
        self.ttl_s = ttl_s
        # (tenant, key id or None for the active key) -> (deadline, row)
        self._cache: dict[tuple[uuid.UUID, int | None], tuple[float, dict[str, Any]]] = {}
        # an expired row is read once for all the deliveries that want it at that moment
        self._gathered: Gathered[int | None, Row] = Gathered(self._read)

    async def _read(self, tid: uuid.UUID, versions: list[int | None]) -> dict[int | None, Row]:
        async with pipelined_transaction(self._pool, tid) as conn:
            cursors = [await tenant_keys.key_cursor(conn, tid, v) for v in versions]
            rows = [await cur.fetchone() for cur in cursors]
        return {v: row for v, row in zip(versions, rows, strict=True) if row is not None}

    def _cached(self, key: tuple[uuid.UUID, int | None]) -> dict[str, Any] | None:
        hit = self._cache.get(key)
        if hit is None:
            return None
        if hit[0] <= time.monotonic():
            self._cache.pop(key, None)
            return None
        return hit[1]

    def _remember(self, key: tuple[uuid.UUID, int | None], row: dict[str, Any]) -> None:
        if len(self._cache) >= _CACHE_MAX:
            self._cache.clear()
        self._cache[key] = (time.monotonic() + self.ttl_s, row)

    def forget(self, tenant_id: TenantId) -> None:
        """Drop what this process remembers of the tenant's keys."""
        tid = _uuid(tenant_id)
        for key in [k for k in self._cache if k[0] == tid]:
            del self._cache[key]

    async def active_row(self, tenant_id: uuid.UUID, conn: Conn | None = None) -> Row | None:
        """The active ``tenant_keys`` row (with the tenant's ``tenant_kek_ref``), on ``conn``
        when given (the caller's tenant transaction), else in a transaction of its own."""
        return await self._row(tenant_id, None, conn)

    async def row(self, tenant_id: uuid.UUID, version: int) -> Row | None:
        """A usable (active or retired) version."""
        return await self._row(tenant_id, version, None)

    async def _row(self, tid: uuid.UUID, version: int | None, conn: Conn | None) -> Row | None:
        cached = self._cached((tid, version))
        if cached is not None:
            return cached
        if conn is None:
            row = await self._gathered.ask(tid, version)
        else:
            row = await tenant_keys.key_row(conn, tid, version)
        if row is not None:
            self._remember((tid, version), row)
        return row

    async def get_active(self, tenant_id: TenantId) -> StoredDataKey | None:
        row = await self.active_row(_uuid(tenant_id))
        return None if row is None else _stored(row)

    async def active_in(self, conn: Conn, tenant_id: uuid.UUID) -> StoredDataKey | None:
        """``get_active`` on the caller's tenant transaction (no second connection)."""
        row = await self.active_row(tenant_id, conn)
        return None if row is None else _stored(row)

    async def get(self, tenant_id: TenantId, key_id: int) -> StoredDataKey | None:
        row = await self.row(_uuid(tenant_id), key_id)
        return None if row is None else _stored(row)

    async def put(self, tenant_id: TenantId, wrapped: WrappedDataKey) -> StoredDataKey:
        tid = _uuid(tenant_id)
        self.forget(tid)
        try:
            async with tenant_transaction(self._pool, SCOPE, tid) as conn:
                return await store_wrapped_key(conn, tid, wrapped)
        finally:
            self.forget(tid)

    async def delete(self, tenant_id: TenantId) -> None:
        tid = _uuid(tenant_id)
        self.forget(tid)
        try:
            async with tenant_transaction(self._pool, SCOPE, tid) as conn:
                await tenant_keys.destroy_keys(conn, tid)
        finally:
            self.forget(tid)
