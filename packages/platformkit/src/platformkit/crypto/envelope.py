"""Envelope encryption of tenant secrets: the sealed format and the ``Envelope`` service.

Sealed layout (version 1)::

    byte  0       version, 0x01
    bytes 1..4    data key id, unsigned 32-bit big-endian
    bytes 5..16   nonce, 12 random bytes
    bytes 17..    AES-256-GCM ciphertext followed by its 16-byte tag

The associated data is the 5-byte header followed by ``canonical_json([tenant_id, owner])``,
so a ciphertext only opens for the tenant and owner it was sealed for (``owner`` names the
record and field holding it, e.g. ``"credential:<id>:secret"``) and its header cannot be
edited. Random nonces are safe here: far fewer than 2**32 messages go under one data key.
"""

from __future__ import annotations

import os
import struct
import time

from cryptography.exceptions import InvalidTag
from wirekit import canonical_json

from platformkit.crypto.datakeys import (
    DataKey,
    DataKeyStore,
    StoredDataKey,
    TenantId,
    UnwrapError,
    new_data_key,
    unwrap_data_key,
)
from platformkit.crypto.keyring import Keyring

__all__ = [
    "VERSION",
    "DataKeyUnavailableError",
    "DecryptionError",
    "Envelope",
    "open_sealed",
    "seal",
    "sealed_key_id",
]

VERSION = 1
_HEADER = struct.Struct(">BI")
_NONCE = 12
_MIN_SIZE = _HEADER.size + _NONCE + 16
_UNWRAPPED_MAX = 10_000


class DecryptionError(Exception):
    """The ciphertext is malformed, was tampered with, or belongs to another tenant or owner."""


class DataKeyUnavailableError(DecryptionError):
    """The data key the ciphertext names is gone (the tenant's keys were deleted) or unknown."""


def _aad(header: bytes, tenant_id: TenantId, owner: str) -> bytes:
    return header + canonical_json([str(tenant_id), owner])


def seal(data_key: DataKey, plaintext: bytes, *, tenant_id: TenantId, owner: str) -> bytes:
    """Encrypt ``plaintext`` under ``data_key`` for this tenant and owner."""
    header = _HEADER.pack(VERSION, data_key.key_id)
    nonce = os.urandom(_NONCE)
    body = data_key.aead().encrypt(nonce, plaintext, _aad(header, tenant_id, owner))
    return header + nonce + body


def sealed_key_id(sealed: bytes) -> int:
    """The data key id a sealed value names; raises DecryptionError if it is not one."""
    if len(sealed) < _MIN_SIZE:
        raise DecryptionError("ciphertext too short")
    version, key_id = _HEADER.unpack_from(sealed)
    if version != VERSION:
        raise DecryptionError(f"unknown ciphertext version {version}")
    return int(key_id)


def open_sealed(data_key: DataKey, sealed: bytes, *, tenant_id: TenantId, owner: str) -> bytes:
    """Decrypt a value made by ``seal``; DecryptionError on any mismatch or tampering."""
    if sealed_key_id(sealed) != data_key.key_id:
        raise DecryptionError("ciphertext was sealed under another data key")
    header, nonce = sealed[: _HEADER.size], sealed[_HEADER.size : _HEADER.size + _NONCE]
    body = sealed[_HEADER.size + _NONCE :]
    try:
        return data_key.aead().decrypt(nonce, body, _aad(header, tenant_id, owner))
    except InvalidTag:
        raise DecryptionError("ciphertext does not authenticate") from None


class Envelope:
    """Encrypt and decrypt tenant values with per-tenant data keys wrapped by the keyring.

    Every operation asks the store for the wrapped key, so deleting a tenant's keys takes effect
    as soon as the store stops returning them. By default each use unwraps again. With
    ``unwrapped_ttl_s`` an unwrapped key is reused for that long, remembered under the tenant
    and the exact wrapped row it came from: a key the store no longer returns (deleted,
    destroyed, re-wrapped under another deployment key) is never served from memory, and only
    a deployment key taken out of the keyring takes up to that long to stop opening values.
    """

    def __init__(
        self, keyring: Keyring, store: DataKeyStore, *, unwrapped_ttl_s: float = 0.0
    ) -> None:
        self._keyring = keyring
        self._store = store
        self._unwrapped_ttl_s = unwrapped_ttl_s
        self._unwrapped: dict[tuple[str, StoredDataKey], tuple[float, DataKey]] = {}

    def unwrap(self, tenant_id: TenantId, stored: StoredDataKey) -> DataKey:
        """``stored`` unwrapped for ``tenant_id``; DataKeyUnavailableError if it does not open."""
        if self._unwrapped_ttl_s <= 0:
            return self._unwrap(tenant_id, stored)
        memo = (str(tenant_id), stored)
        hit = self._unwrapped.get(memo)
        now = time.monotonic()
        if hit is not None and hit[0] > now:
            return hit[1]
        key = self._unwrap(tenant_id, stored)
        if len(self._unwrapped) >= _UNWRAPPED_MAX:
            self._unwrapped = {k: v for k, v in self._unwrapped.items() if v[0] > now}
            if len(self._unwrapped) >= _UNWRAPPED_MAX:
                self._unwrapped.clear()
        self._unwrapped[memo] = (now + self._unwrapped_ttl_s, key)
        return key

    def _unwrap(self, tenant_id: TenantId, stored: StoredDataKey) -> DataKey:
        try:
            return unwrap_data_key(self._keyring, stored.wrapped, tenant_id, key_id=stored.key_id)
        except UnwrapError as exc:
            raise DataKeyUnavailableError(str(exc)) from exc

    async def _active_key(self, tenant_id: TenantId) -> DataKey:
        stored = await self._store.get_active(tenant_id)
        if stored is None:
            stored = await self._store.put(tenant_id, new_data_key(self._keyring, tenant_id))
        return self.unwrap(tenant_id, stored)

    async def encrypt(self, tenant_id: TenantId, plaintext: bytes, *, owner: str) -> bytes:
        """Seal under the tenant's active data key, creating the tenant's first key if needed."""
        key = await self._active_key(tenant_id)
        return seal(key, plaintext, tenant_id=tenant_id, owner=owner)

    async def decrypt(self, tenant_id: TenantId, sealed: bytes, *, owner: str) -> bytes:
        """Open with whichever of the tenant's data keys the ciphertext names."""
        key_id = sealed_key_id(sealed)
        stored = await self._store.get(tenant_id, key_id)
        if stored is None:
            raise DataKeyUnavailableError(f"tenant {tenant_id} has no data key {key_id}")
        return open_sealed(self.unwrap(tenant_id, stored), sealed, tenant_id=tenant_id, owner=owner)

    async def rotate_tenant_key(self, tenant_id: TenantId) -> int:
        """Give the tenant a new active data key under the active deployment key; old keys stay."""
        stored = await self._store.put(tenant_id, new_data_key(self._keyring, tenant_id))
        return stored.key_id

    async def reencrypt(self, tenant_id: TenantId, sealed: bytes, *, owner: str) -> bytes:
        """Re-seal under the active data key; returns ``sealed`` unchanged if already under it."""
        active = await self._active_key(tenant_id)
        if sealed_key_id(sealed) == active.key_id:
            open_sealed(active, sealed, tenant_id=tenant_id, owner=owner)  # still authenticate
            return sealed
        plaintext = await self.decrypt(tenant_id, sealed, owner=owner)
        return seal(active, plaintext, tenant_id=tenant_id, owner=owner)

    async def delete_tenant_keys(self, tenant_id: TenantId) -> None:
        """Crypto-shred: every ciphertext of the tenant becomes permanently unreadable."""
        await self._store.delete(tenant_id)
