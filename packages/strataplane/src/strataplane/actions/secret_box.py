"""The deployment keyring as the server uses it: loaded once per process, its keys' fingerprints
kept in secret_key, and an ``Envelope`` over tenant_key for each transaction.

A fingerprint is SHA-256 over a fixed label encrypted with the key (a fixed nonce is harmless
for one fixed message), so the database can tell a wrong or incomplete keyring at start without
holding key material: a key id the database knows under another fingerprint is refused.
"""

from __future__ import annotations

import hashlib
import threading
from pathlib import Path
from uuid import UUID

from platformkit.crypto import DeploymentKey, Envelope, Keyring, load_or_create_keyring
from platformkit.db.scope import Conn, Pool, transaction

from strataplane.actions.secret_errors import KeyringMismatch
from strataplane.settings import Settings
from strataplane.store import sealed, secret_keys
from strataplane.store.secret_keys import TenantKeyStore

__all__ = [
    "fingerprint",
    "keyring_path",
    "load_keyring",
    "open_value",
    "seal_value",
    "sync_keyring",
]

_LABEL = b"strataplane secret_key fingerprint v1"
_lock = threading.Lock()
_loaded: dict[Path, tuple[int, Keyring]] = {}


def fingerprint(key: DeploymentKey) -> bytes:
    return hashlib.sha256(key.aead().encrypt(b"\0" * 12, _LABEL, None)).digest()


def keyring_path(settings: Settings) -> Path:
    if settings.keyring_path is not None:
        return settings.keyring_path
    from platformdirs import user_data_dir

    return Path(user_data_dir("strataplane")) / "keyring.json"


def _mtime(path: Path) -> int:
    try:
        return path.stat().st_mtime_ns
    except FileNotFoundError:
        return -1


def load_keyring(settings: Settings) -> Keyring:
    """The process's keyring, read again when the file changed (``rotate-keyring`` and
    ``restore-key`` in another process); created (0600) on first use when there is none."""
    path = keyring_path(settings)
    with _lock:
        stamp = _mtime(path)
        cached = _loaded.get(path)
        if cached is not None and cached[0] == stamp:
            return cached[1]
        found = load_or_create_keyring(path)
        _loaded[path] = (_mtime(path), found)
        return found


def forget_keyring(settings: Settings) -> None:
    """Drop the cached keyring (after the file changed: rotation, restore)."""
    with _lock:
        _loaded.pop(keyring_path(settings), None)


async def sync_keyring(pool: Pool, keyring: Keyring) -> list[int]:
    """Record new keys' fingerprints; refuse a keyring whose key differs from the recorded one.
    Returns the ids of keys never exported (``secrets export-key``)."""
    async with transaction(pool) as conn:
        known = {k.id: k.fingerprint for k in await secret_keys.list_secret_keys(conn)}
        for key_id in keyring.ids:
            mark = fingerprint(keyring.get(key_id))
            if key_id in known and known[key_id] != mark:
                raise KeyringMismatch(
                    f"keyring key {key_id} is not the key this database knows under that id; "
                    "restore the keyring backup that belongs to this database"
                )
            if key_id not in known:
                await secret_keys.insert_secret_key(conn, key_id, mark)
        await secret_keys.retire_other_keys(conn, keyring.active_id)
        rows = await secret_keys.list_secret_keys(conn)
    return [k.id for k in rows if k.exported_at is None]


def envelope(keyring: Keyring, conn: Conn) -> Envelope:
    return Envelope(keyring, TenantKeyStore(conn))


async def seal_value(
    keyring: Keyring, conn: Conn, tenant_id: UUID, value_id: UUID, owner: str, plaintext: bytes
) -> None:
    box = envelope(keyring, conn)
    await sealed.insert_sealed(
        conn, tenant_id, value_id, owner, await box.encrypt(tenant_id, plaintext, owner=owner)
    )


async def open_value(keyring: Keyring, conn: Conn, tenant_id: UUID, row: sealed.SealedRow) -> bytes:
    """Raises platformkit's DecryptionError (DataKeyUnavailableError once keys are shredded)."""
    box = envelope(keyring, conn)
    return await box.decrypt(tenant_id, sealed.sealed_bytes(row), owner=row.owner)
