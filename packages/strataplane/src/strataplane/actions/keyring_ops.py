"""The deployment keyring from the operator's command line (docs/strataplane/secrets.md):
export a backup, restore one, rotate to a new key, and show what the database recorded.

They run with the administrative database URL on the server's host, where the keyring file is
(``STRATAPLANE_KEYRING_PATH``); the database only ever holds fingerprints.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from uuid import UUID

from platformkit.crypto import Envelope, Keyring, KeyringError
from platformkit.db.pool import open_pool
from platformkit.db.scope import Pool, platform_transaction, tenant_transaction, transaction

from strataplane import db
from strataplane.actions import secret_box
from strataplane.actions.secret_errors import KeyringMismatch
from strataplane.settings import Settings
from strataplane.store import sealed, secret_keys
from strataplane.store.secret_keys import TenantKeyStore

_BATCH = 500


@dataclass(frozen=True)
class Rotation:
    key_id: int
    tenants: int
    values: int


@asynccontextmanager
async def _pool(admin_url: str) -> AsyncIterator[Pool]:
    pool = await open_pool(db.app_url(admin_url), min_size=1, max_size=2)
    try:
        yield pool
    finally:
        await pool.close()


def _write_exclusive(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as fh:
        os.fchmod(fh.fileno(), 0o600)
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())


def _replace(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            os.fchmod(fh.fileno(), 0o600)
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _copy_out(source: Path, output: Path) -> None:
    _write_exclusive(output, source.read_bytes())


def _install(backup: Path, target: Path) -> None:
    _replace(target, backup.read_bytes())


async def export_keyring(admin_url: str, output: Path) -> list[int]:
    """Copy the keyring file to ``output`` (new, 0600); secret_key.exported_at is set."""
    settings = Settings()
    ring = secret_box.load_keyring(settings)
    async with _pool(admin_url) as pool:
        await secret_box.sync_keyring(pool, ring)
        _copy_out(secret_box.keyring_path(settings), output)
        async with transaction(pool) as conn:
            await secret_keys.mark_exported(conn, ring.ids)
    return ring.ids


async def _check_against_database(pool: Pool, ring: Keyring) -> None:
    async with transaction(pool) as conn:
        recorded = await secret_keys.list_secret_keys(conn)
    for row in recorded:
        try:
            mark = secret_box.fingerprint(ring.get(row.id))
        except KeyringError:
            msg = f"the backup lacks key {row.id}, which this database uses"
            raise KeyringMismatch(msg) from None
        if mark != row.fingerprint:
            raise KeyringMismatch(f"the backup's key {row.id} is not this database's key {row.id}")


async def restore_keyring(admin_url: str, backup: Path) -> Path:
    """Check ``backup`` against every fingerprint the database recorded, then install it."""
    settings = Settings()
    ring = Keyring.load(backup)
    async with _pool(admin_url) as pool:
        await _check_against_database(pool, ring)
    target = secret_box.keyring_path(settings)
    _install(backup, target)
    secret_box.forget_keyring(settings)
    return target


async def _tenants_with_keys(pool: Pool) -> list[UUID]:
    async with platform_transaction(pool, db.SCOPE) as conn:
        cur = await conn.execute("SELECT DISTINCT tenant_id FROM tenant_key ORDER BY tenant_id")
        return [r["tenant_id"] for r in await cur.fetchall()]


async def rotate_tenant(pool: Pool, ring: Keyring, tenant_id: UUID) -> int:
    """A new data key under the active deployment key; every value re-encrypted under it in
    batches; the data keys no value uses any more are deleted. Safe to repeat."""
    async with tenant_transaction(pool, db.SCOPE, tenant_id) as conn:
        store = TenantKeyStore(conn)
        active = await store.get_active(tenant_id)
        if active is None or active.wrapped.kek_id != ring.active_id:
            await Envelope(ring, store).rotate_tenant_key(tenant_id)
    moved, after = 0, None
    while True:
        async with tenant_transaction(pool, db.SCOPE, tenant_id) as conn:
            store = TenantKeyStore(conn)
            box = Envelope(ring, store)
            current = await store.get_active(tenant_id)
            assert current is not None
            rows = await sealed.not_under(
                conn, tenant_id, current.key_id, after=after, limit=_BATCH
            )
            for row in rows:
                fresh = await box.reencrypt(tenant_id, sealed.sealed_bytes(row), owner=row.owner)
                await sealed.replace_sealed(conn, tenant_id, row.id, fresh)
            if not rows:
                await conn.execute(
                    "DELETE FROM tenant_key k WHERE k.tenant_id = %s AND k.id <> %s AND NOT "
                    "EXISTS (SELECT 1 FROM sealed_value s WHERE s.tenant_id = k.tenant_id "
                    "AND s.key_id = k.id)",
                    (tenant_id, current.key_id),
                )
                return moved
            moved += len(rows)
            after = rows[-1].id


async def rotate_keyring(admin_url: str, say: Callable[[str], None]) -> Rotation:
    settings = Settings()
    ring = secret_box.load_keyring(settings)
    async with _pool(admin_url) as pool:
        await secret_box.sync_keyring(pool, ring)
        key = ring.add_key()
        say(f"added key {key.id} to {secret_box.keyring_path(settings)}")
        await secret_box.sync_keyring(pool, ring)
        tenants = await _tenants_with_keys(pool)
        values = 0
        for n, tenant_id in enumerate(tenants, 1):
            values += await rotate_tenant(pool, ring, tenant_id)
            say(f"tenant {n}/{len(tenants)} re-encrypted")
    return Rotation(key.id, len(tenants), values)


async def keyring_status(admin_url: str) -> list[dict[str, Any]]:
    async with _pool(admin_url) as pool:
        async with transaction(pool) as conn:
            keys = await secret_keys.list_secret_keys(conn)
        async with platform_transaction(pool, db.SCOPE) as conn:
            usage = await secret_keys.kek_usage(conn)
    return [
        {
            "id": k.id,
            "fingerprint": k.fingerprint.hex()[:16],
            "created_at": k.created_at,
            "exported_at": k.exported_at,
            "retired_at": k.retired_at,
            "tenant_keys": usage.get(k.id, 0),
        }
        for k in keys
    ]
