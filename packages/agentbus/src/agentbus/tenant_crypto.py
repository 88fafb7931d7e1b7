"""Sealing and opening tenant payloads under the tenant's data keys, whatever wraps them
(data model §5.2, §5.3; ``agentbus.kms``).

- New writes use the active version; a read uses the version its ciphertext names, so payloads
  sealed before a rotation stay readable.
- An unwrapped key is reused for ``ttl_s`` (600 s by default, §5.2), remembered under the exact
  wrapped bytes it came from: a destroyed or re-wrapped row is never served from memory. A BYOK
  key revoked at the customer's KMS stops opening payloads when that memory runs out.
- Lazy re-wrap: a key found wrapped under anything but the tenant's current KEK (an older
  deployment keyring key, the platform keyring after the tenant brought its own key, or the
  tenant's previous KMS key) is wrapped again under the current one when it is next unwrapped,
  compare-and-set on the old bytes so two processes do it once. No payload byte changes.
"""

from __future__ import annotations

import logging
import secrets
import time
import uuid
from typing import Any

from platformkit.crypto import DataKey, DataKeyUnavailableError, open_sealed, sealed_key_id
from platformkit.db.scope import Conn, Pool, tenant_transaction

from agentbus.db import SCOPE
from agentbus.keys import TenantKeyStore, store_key
from agentbus.kms import KeyProviderError, KeyProviders
from agentbus.store import tenant_keys, tenants

log = logging.getLogger(__name__)
Row = dict[str, Any]
KEY_BYTES = 32
_MEMO_MAX = 10000


class TenantCrypto:
    def __init__(
        self, pool: Pool, store: TenantKeyStore, providers: KeyProviders, *, ttl_s: float = 600.0
    ) -> None:
        self.pool, self.store, self.providers, self.ttl_s = pool, store, providers, ttl_s
        self._memo: dict[tuple[uuid.UUID, int, bytes], tuple[float, DataKey]] = {}

    def current(self, row: Row) -> bool:
        """Whether ``row`` is wrapped under its tenant's current KEK."""
        tenant_ref = row["tenant_kek_ref"]
        try:
            return self.providers.for_ref(tenant_ref).current(row["kek_ref"], tenant_ref)
        except KeyProviderError:
            return True  # nothing to re-wrap to; reads go on under the row's own provider

    async def material(self, tenant_id: uuid.UUID, row: Row) -> bytes:
        """The raw key of ``row``; DataKeyUnavailableError (AB-9020) when it does not unwrap."""
        try:
            provider = self.providers.for_ref(row["kek_ref"])
            return await provider.unwrap(row["kek_ref"], tenant_id, bytes(row["dek_wrapped"]))
        except KeyProviderError as exc:
            raise DataKeyUnavailableError(str(exc)) from exc

    async def key_for(self, tenant_id: uuid.UUID, row: Row) -> DataKey:
        memo = (tenant_id, int(row["version"]), bytes(row["dek_wrapped"]))
        now = time.monotonic()
        hit = self._memo.get(memo)
        if hit is not None and hit[0] > now:
            return hit[1]
        material = await self.material(tenant_id, row)
        key = DataKey(int(row["version"]), material)
        if len(self._memo) >= _MEMO_MAX:
            self._memo.clear()
        self._memo[memo] = (now + self.ttl_s, key)
        if not self.current(row):
            try:
                await self.rewrap(tenant_id, row, material)
            except (KeyProviderError, OSError) as exc:  # the read goes on; next use tries again
                version = row["version"]
                log.warning("re-wrap of tenant %s key %s failed: %s", tenant_id, version, exc)
        return key

    async def rewrap(self, tenant_id: uuid.UUID, row: Row, material: bytes) -> bool:
        """Wrap ``material`` under the tenant's current KEK in place of ``row``'s wrapping."""
        tenant_ref = row["tenant_kek_ref"]
        provider = self.providers.for_ref(tenant_ref)
        kek_ref, wrapped = await provider.wrap_key(tenant_ref, tenant_id, material)
        async with tenant_transaction(self.pool, SCOPE, tenant_id) as conn:
            done = await tenant_keys.rewrap(
                conn, tenant_id, int(row["version"]), bytes(row["dek_wrapped"]), wrapped=wrapped,
                kek_ref=kek_ref, kek_provider=provider.name,
            )  # fmt: skip
        self.store.forget(tenant_id)
        return done

    async def new_key_in(self, conn: Conn, tenant_id: uuid.UUID) -> Row:
        """A new active version under the tenant's current KEK, in the caller's transaction
        (which it locks the tenant row in); the previous version is retired, never destroyed."""
        tenant = await tenants.lock_tenant(conn, tenant_id)
        if tenant is None:
            raise DataKeyUnavailableError(f"no tenant {tenant_id}")
        tenant_ref = tenant["kek_ref"]
        try:
            provider = self.providers.for_ref(tenant_ref)
            kek_ref, wrapped = await provider.wrap_key(
                tenant_ref, tenant_id, secrets.token_bytes(KEY_BYTES)
            )
        except KeyProviderError as exc:
            raise DataKeyUnavailableError(str(exc)) from exc
        row = await store_key(
            conn, tenant_id, kek_ref=kek_ref, kek_provider=provider.name, wrapped=wrapped
        )
        self.store.forget(tenant_id)
        return {**row, "tenant_kek_ref": tenant_ref}

    async def active_key_in(self, conn: Conn, tenant_id: uuid.UUID) -> DataKey:
        """The key new payloads are sealed with, read on (or, for a tenant without one,
        created in) the caller's tenant transaction."""
        row = await self.store.active_row(tenant_id, conn)
        if row is None:
            row = await self.new_key_in(conn, tenant_id)
        return await self.key_for(tenant_id, row)

    async def decrypt(self, tenant_id: uuid.UUID, sealed: bytes, *, owner: str) -> bytes:
        """Open with whichever version the ciphertext names."""
        version = sealed_key_id(sealed)
        row = await self.store.row(tenant_id, version)
        if row is None:
            raise DataKeyUnavailableError(f"tenant {tenant_id} has no data key {version}")
        key = await self.key_for(tenant_id, row)
        return open_sealed(key, sealed, tenant_id=tenant_id, owner=owner)
