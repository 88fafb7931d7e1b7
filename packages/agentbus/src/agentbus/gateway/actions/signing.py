"""Platform signing keys (``signing_keys``): Ed25519 keys that sign agent credentials and receipts.

The private half is stored wrapped by the deployment keyring (the platform KEK of data model §5):
``version (1) || kek id (4, big-endian) || nonce (12) || AES-256-GCM(raw 32-byte key)``, with
``canonical_json(["agentbus-signing-key/v1", kid, kek_id])`` as associated data, so a wrapped
key cannot be moved to another kid. Keys are created on the owner's side
(``ensure_signing_key``, through ``create_signing_key()``); the gateway reads them through the
``signing_keys_usable`` and ``signing_keys_public`` views.

A database whose keys another keyring wrapped (a lost or replaced keyring.json, another config
folder on the same database) is ``KeyringMismatch``; ``check_keyring`` finds it before the
gateway's workers start or the admin CLI wraps anything with the wrong keyring.
"""

from __future__ import annotations

import asyncio
import logging
import os
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from platformkit.crypto import Keyring, KeyringError
from platformkit.db.scope import Pool, transaction
from psycopg import AsyncConnection
from psycopg.rows import tuple_row
from wirekit import canonical_json

from agentbus.gateway.domain import ed25519
from agentbus.ids import new_signing_kid

log = logging.getLogger(__name__)
_HEADER = struct.Struct(">BI")
_VERSION = 1
_NONCE = 12


class KeyringMismatch(RuntimeError):
    """The database's signing keys were wrapped with another deployment keyring."""

    code = "keyring.mismatch"


def _aad(kid: str, kek_id: int) -> bytes:
    return canonical_json(["agentbus-signing-key/v1", kid, kek_id])


def raw_public(key: Ed25519PublicKey) -> bytes:
    return key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def wrap_private_key(keyring: Keyring, kid: str, key: Ed25519PrivateKey) -> bytes:
    raw = key.private_bytes(
        serialization.Encoding.Raw, serialization.PrivateFormat.Raw, serialization.NoEncryption()
    )
    kek = keyring.active()
    nonce = os.urandom(_NONCE)
    return (
        _HEADER.pack(_VERSION, kek.id) + nonce + kek.aead().encrypt(nonce, raw, _aad(kid, kek.id))
    )


def unwrap_private_key(keyring: Keyring, kid: str, wrapped: bytes) -> Ed25519PrivateKey:
    version, kek_id = _HEADER.unpack_from(wrapped)
    if version != _VERSION:
        raise ValueError(f"signing key {kid}: unknown wrapping version {version}")
    nonce = wrapped[_HEADER.size : _HEADER.size + _NONCE]
    try:
        raw = (
            keyring.get(kek_id)
            .aead()
            .decrypt(nonce, wrapped[_HEADER.size + _NONCE :], _aad(kid, kek_id))
        )
    except (InvalidTag, KeyringError) as exc:
        raise KeyringMismatch(f"signing key {kid} was wrapped with another keyring") from exc
    return Ed25519PrivateKey.from_private_bytes(raw)


async def wrapped_keys(conn: AsyncConnection[Any]) -> list[tuple[str, bytes]]:
    """(kid, wrapped private key) of every usable signing key, for ``check_keyring``."""
    async with conn.cursor(row_factory=tuple_row) as cur:
        await cur.execute("SELECT kid, private_key_enc FROM signing_keys_usable")
        return [(kid, bytes(wrapped)) for kid, wrapped in await cur.fetchall()]


def check_keyring(wrapped: list[tuple[str, bytes]], path: Path) -> None:
    """``KeyringMismatch`` unless the keyring at ``path`` unwraps every key of ``wrapped`` (no
    keyring file yet is fine while there is no key either)."""
    if not wrapped:
        return
    advice = (
        "restore the keyring.json the database was set up with (AGENTBUS_KEYRING_PATH or "
        "AGENTBUS_CONFIG_DIR), or point AGENTBUS_DATABASE_URL at another database"
    )
    if not path.exists():
        raise KeyringMismatch(
            f"there is no keyring at {path}, but the database's keys need it: {advice}"
        )
    keyring = Keyring.load(path)
    for kid, key in wrapped:
        try:
            unwrap_private_key(keyring, kid, key)
        except KeyringMismatch as exc:
            raise KeyringMismatch(
                f"the keyring at {path} did not wrap the database's signing keys: {advice}"
            ) from exc


async def ensure_signing_key(admin_conn: AsyncConnection[Any], keyring: Keyring) -> str | None:
    """Owner path: create a key unless a usable one exists; the new kid, or None."""
    kid, key = new_signing_kid(), Ed25519PrivateKey.generate()
    cur = await admin_conn.execute(
        "SELECT create_signing_key(%s, %s, %s, true)",
        (kid, raw_public(key.public_key()), wrap_private_key(keyring, kid, key)),
    )
    row = await cur.fetchone()
    return kid if row is not None and row[0] else None


async def rotate_signing_key(admin_conn: AsyncConnection[Any], keyring: Keyring) -> str:
    """Owner path: add a new key; it signs from the next refresh on, old keys stay valid."""
    kid, key = new_signing_kid(), Ed25519PrivateKey.generate()
    await admin_conn.execute(
        "SELECT create_signing_key(%s, %s, %s, false)",
        (kid, raw_public(key.public_key()), wrap_private_key(keyring, kid, key)),
    )
    return kid


@dataclass
class SigningKeys:
    """The keys this gateway knows: the newest usable one signs, every one verifies."""

    keyring: Keyring
    signer_kid: str | None = None
    _private: dict[str, Ed25519PrivateKey] = field(default_factory=dict, repr=False)
    _signers: dict[str, ed25519.Signer] = field(default_factory=dict, repr=False)
    public: dict[str, Ed25519PublicKey] = field(default_factory=dict)
    retired: dict[str, Any] = field(default_factory=dict)
    verified: dict[str, tuple[float, str, Any]] = field(default_factory=dict, repr=False)
    """Credentials that verified: token -> (valid until, kid, claims); see ``credentials``."""

    async def refresh(self, pool: Pool) -> None:
        async with transaction(pool) as conn:
            usable = await (
                await conn.execute(
                    "SELECT kid, private_key_enc FROM signing_keys_usable ORDER BY created_at, kid"
                )
            ).fetchall()
            every = await (
                await conn.execute("SELECT kid, public_key, retired_at FROM signing_keys_public")
            ).fetchall()
        for row in usable:
            if row["kid"] not in self._private:
                self._private[row["kid"]] = unwrap_private_key(
                    self.keyring, row["kid"], bytes(row["private_key_enc"])
                )
        self.public = {r["kid"]: Ed25519PublicKey.from_public_bytes(r["public_key"]) for r in every}
        self.retired = {r["kid"]: r["retired_at"] for r in every if r["retired_at"] is not None}
        usable_kids = [r["kid"] for r in usable]
        self._private = {k: v for k, v in self._private.items() if k in usable_kids}
        self._signers = {
            k: self._signers.get(k) or ed25519.Signer(v) for k, v in self._private.items()
        }
        self.signer_kid = usable_kids[-1] if usable_kids else None

    def signer(self) -> tuple[str, Ed25519PrivateKey]:
        if self.signer_kid is None:
            raise RuntimeError("no usable signing key; start the gateway with `serve`")
        return self.signer_kid, self._private[self.signer_kid]

    def sign(self, data: bytes) -> tuple[str, bytes]:
        kid, _key = self.signer()
        return kid, self._signers[kid].sign(data)

    def usable_public(self, kid: str) -> Ed25519PublicKey | None:
        """A key whose credentials are accepted: known and not retired."""
        return None if kid in self.retired else self.public.get(kid)


async def keep_fresh(keys: SigningKeys, pool: Pool, interval_s: float) -> None:
    """Re-read the signing keys every ``interval_s``, in every process: the daily
    ``keys.rotate`` job adds and retires keys in one process (the leader), and the others must
    start signing with the new key and stop accepting the retired one."""
    while True:
        await asyncio.sleep(interval_s)
        try:
            await keys.refresh(pool)
        except Exception as exc:  # the database away for a while: try again next time
            log.warning("signing keys not refreshed: %s", exc)
