"""Per-tenant data keys: creating, wrapping under the keyring, unwrapping, and where they live.

A data key is 32 random bytes that encrypt a tenant's secrets. It is stored only wrapped:
``nonce (12 bytes) || AES-256-GCM(deployment key, data key)`` with the associated data
``canonical_json(["platformkit-dek/v1", tenant_id, kek_id])``, so a wrapped key copied to
another tenant's row, or relabelled with another deployment key id, fails to unwrap.

Where wrapped keys live is the ``DataKeyStore`` protocol; each system implements it on its
own table, and ``InMemoryDataKeyStore`` serves tests.
"""

from __future__ import annotations

import os
import secrets
import uuid
from dataclasses import dataclass
from typing import Protocol

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from wirekit import canonical_json

from platformkit.crypto.keyring import KEY_SIZE, Keyring, KeyringError

__all__ = [
    "DataKey",
    "DataKeyStore",
    "InMemoryDataKeyStore",
    "StoredDataKey",
    "TenantId",
    "UnwrapError",
    "WrappedDataKey",
    "new_data_key",
    "unwrap_data_key",
    "unwrap_material",
    "wrap_material",
]

TenantId = str | uuid.UUID
NONCE_SIZE = 12


class UnwrapError(Exception):
    """A wrapped data key does not open under the named deployment key for this tenant."""


@dataclass(frozen=True)
class WrappedDataKey:
    kek_id: int
    wrapped: bytes


@dataclass(frozen=True)
class StoredDataKey:
    """A tenant's data key as a store holds it; ``key_id`` is unique per tenant."""

    key_id: int
    wrapped: WrappedDataKey


class DataKey:
    """An unwrapped data key. The material stays private and out of ``repr``."""

    __slots__ = ("_aead", "key_id")

    def __init__(self, key_id: int, material: bytes) -> None:
        if len(material) != KEY_SIZE:
            raise ValueError(f"data key must be {KEY_SIZE} bytes")
        self.key_id = key_id
        self._aead = AESGCM(material)

    def __repr__(self) -> str:
        return f"DataKey(key_id={self.key_id})"

    __str__ = __repr__

    def aead(self) -> AESGCM:
        """AES-256-GCM under this data key."""
        return self._aead


def _tenant(tenant_id: TenantId) -> str:
    return str(tenant_id)


def _wrap_aad(tenant_id: TenantId, kek_id: int) -> bytes:
    return canonical_json(["platformkit-dek/v1", _tenant(tenant_id), kek_id])


def wrap_material(keyring: Keyring, tenant_id: TenantId, material: bytes) -> WrappedDataKey:
    """Wrap data key ``material`` for ``tenant_id`` under the active deployment key (also used
    to re-wrap a key under a newer deployment key or from another key provider)."""
    if len(material) != KEY_SIZE:
        raise ValueError(f"data key must be {KEY_SIZE} bytes")
    kek = keyring.active()
    nonce = os.urandom(NONCE_SIZE)
    sealed = kek.aead().encrypt(nonce, material, _wrap_aad(tenant_id, kek.id))
    return WrappedDataKey(kek_id=kek.id, wrapped=nonce + sealed)


def new_data_key(keyring: Keyring, tenant_id: TenantId) -> WrappedDataKey:
    """Make a fresh data key for ``tenant_id`` wrapped under the active deployment key."""
    return wrap_material(keyring, tenant_id, secrets.token_bytes(KEY_SIZE))


def unwrap_material(keyring: Keyring, wrapped: WrappedDataKey, tenant_id: TenantId) -> bytes:
    """The raw data key inside ``wrapped``; UnwrapError when it does not open for the tenant."""
    try:
        kek = keyring.get(wrapped.kek_id)
    except KeyringError as exc:
        raise UnwrapError(str(exc)) from exc
    nonce, body = wrapped.wrapped[:NONCE_SIZE], wrapped.wrapped[NONCE_SIZE:]
    try:
        return kek.aead().decrypt(nonce, body, _wrap_aad(tenant_id, wrapped.kek_id))
    except (InvalidTag, ValueError) as exc:
        raise UnwrapError(f"data key does not unwrap for tenant {_tenant(tenant_id)}") from exc


def unwrap_data_key(
    keyring: Keyring, wrapped: WrappedDataKey, tenant_id: TenantId, *, key_id: int
) -> DataKey:
    """Recover the data key; ``key_id`` is the id it is stored under (carried into ciphertexts)."""
    return DataKey(key_id, unwrap_material(keyring, wrapped, tenant_id))


class DataKeyStore(Protocol):
    """Wrapped data keys per tenant. Implementations allocate ids and track the active key."""

    async def get_active(self, tenant_id: TenantId) -> StoredDataKey | None:
        """The key new ciphertexts use, or None if the tenant has none."""
        ...

    async def get(self, tenant_id: TenantId, key_id: int) -> StoredDataKey | None: ...

    async def put(self, tenant_id: TenantId, wrapped: WrappedDataKey) -> StoredDataKey:
        """Store ``wrapped`` under the tenant's next key id and make it the active key.

        The id must be allocated atomically (for example a unique (tenant, key_id) constraint
        and a retry), because two writers may rotate at once, and never reused, even after
        ``delete``: an old ciphertext must not name a newer key.
        """
        ...

    async def delete(self, tenant_id: TenantId) -> None:
        """Remove every key of the tenant; their ciphertexts become unreadable for good."""
        ...


class InMemoryDataKeyStore:
    """A ``DataKeyStore`` in a dict, for tests and single-process tools."""

    def __init__(self) -> None:
        self._keys: dict[str, dict[int, WrappedDataKey]] = {}
        self._active: dict[str, int] = {}
        self._last_id: dict[str, int] = {}  # survives delete, so ids are never reused

    async def get_active(self, tenant_id: TenantId) -> StoredDataKey | None:
        key_id = self._active.get(_tenant(tenant_id))
        return None if key_id is None else await self.get(tenant_id, key_id)

    async def get(self, tenant_id: TenantId, key_id: int) -> StoredDataKey | None:
        wrapped = self._keys.get(_tenant(tenant_id), {}).get(key_id)
        return None if wrapped is None else StoredDataKey(key_id, wrapped)

    async def put(self, tenant_id: TenantId, wrapped: WrappedDataKey) -> StoredDataKey:
        tenant = _tenant(tenant_id)
        key_id = self._last_id.get(tenant, 0) + 1
        self._last_id[tenant] = key_id
        self._keys.setdefault(tenant, {})[key_id] = wrapped
        self._active[tenant] = key_id
        return StoredDataKey(key_id, wrapped)

    async def delete(self, tenant_id: TenantId) -> None:
        self._keys.pop(_tenant(tenant_id), None)
        self._active.pop(_tenant(tenant_id), None)
