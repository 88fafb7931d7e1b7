"""The deployment keyring: rotation to a new key keeps every old version readable and leaves
older keys retired; export-key makes a 0600 backup that restore-key installs, and a backup of
another deployment is refused; deleting a tenant destroys its data keys, so a copy of its
sealed values no longer opens (crypto-shredding)."""

from __future__ import annotations

import gc
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from uuid import UUID

import psycopg
import pytest
from platformkit.crypto import DataKeyUnavailableError, Envelope, Keyring, generate_keyring
from platformkit.db.pool import open_pool
from platformkit.db.scope import Pool, platform_transaction, tenant_transaction
from platformkit.passwords import FAST_TEST_POLICY
from platformkit.testing.databases import DatabaseFactory
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool
from strataplane import db
from strataplane.actions import jobs, keyring_ops, secret_box, secrets, tenants
from strataplane.actions.context import Services
from strataplane.actions.secret_errors import KeyringMismatch
from strataplane.db import SCOPE
from strataplane.settings import Settings
from strataplane.simulate.seed import publish
from strataplane.store import sealed
from strataplane.store import secrets as secret_store
from strataplane.store.secret_keys import TenantKeyStore
from strataplane.testing import Seed

TREE = {"secrets/API_KEY.toml": 'owner = "platform"\n\n[grant]\n'}


@pytest.fixture
def keyring_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A keyring of this test's own (rotation adds keys to it)."""
    path = tmp_path / "keys" / "keyring.json"
    monkeypatch.setenv("STRATAPLANE_KEYRING_PATH", str(path))
    yield path
    secret_box.forget_keyring(Settings())


async def _values(services: Services, tenant_id: UUID) -> dict[int, str]:
    ring = secret_box.load_keyring(services.settings)
    found = {}
    async with tenant_transaction(services.pool, SCOPE, tenant_id) as conn:
        for v in await secret_store.versions(conn, tenant_id, "API_KEY"):
            row = await sealed.get_sealed(conn, tenant_id, v.value_id)
            assert row is not None
            found[v.version] = (await secret_box.open_value(ring, conn, tenant_id, row)).decode()
    return found


async def _tenant(seed: Seed) -> UUID:
    tenant, admin = await seed.tenant()
    await publish(seed.services.pool, tenant.id, TREE)
    ctx = seed.ctx(admin, tenant.id)
    for value in ("value-one", "value-two"):
        await secrets.set_secret(ctx, "API_KEY", value)
    return tenant.id


async def test_rotation_keeps_old_versions_readable(
    keyring_file: Path, strataplane_database: str, sp_services: Services
) -> None:
    services = Services(sp_services.pool, Settings(database_url=sp_services.settings.database_url))
    seed = Seed(services)
    first, second = await _tenant(seed), await _tenant(seed)
    lines: list[str] = []
    done = await keyring_ops.rotate_keyring(strataplane_database, lines.append)
    assert (done.key_id, done.tenants, done.values) == (2, 2, 4)
    for tenant_id in (first, second):
        assert await _values(services, tenant_id) == {1: "value-one", 2: "value-two"}
    status = {r["id"]: r for r in await keyring_ops.keyring_status(strataplane_database)}
    assert status[1]["retired_at"] is not None
    assert status[2]["retired_at"] is None
    assert (status[1]["tenant_keys"], status[2]["tenant_keys"]) == (0, 2)
    # a second run has nothing left to move
    again = await keyring_ops.rotate_keyring(strataplane_database, lines.append)
    assert again.values == 4  # a new key again: every value moves once more
    assert await _values(services, first) == {1: "value-one", 2: "value-two"}


async def test_export_and_restore(
    keyring_file: Path, strataplane_database: str, sp_services: Services, tmp_path: Path
) -> None:
    services = Services(sp_services.pool, Settings(database_url=sp_services.settings.database_url))
    tenant_id = await _tenant(Seed(services))
    backup = tmp_path / "backup.json"
    assert await keyring_ops.export_keyring(strataplane_database, backup) == [1]
    assert stat.S_IMODE(backup.stat().st_mode) == 0o600
    status = await keyring_ops.keyring_status(strataplane_database)
    assert status[0]["exported_at"] is not None
    os.unlink(keyring_file)  # the host lost its keyring
    secret_box.forget_keyring(services.settings)
    stranger = generate_keyring(tmp_path / "other.json")
    assert stranger.ids == [1]
    with pytest.raises(KeyringMismatch):
        await keyring_ops.restore_keyring(strataplane_database, tmp_path / "other.json")
    assert not os.path.exists(keyring_file)  # noqa: ASYNC240 - a test's one stat
    restored = await keyring_ops.restore_keyring(strataplane_database, backup)
    assert restored == keyring_file
    assert stat.S_IMODE(os.stat(keyring_file).st_mode) == 0o600
    assert await _values(services, tenant_id) == {1: "value-one", 2: "value-two"}


async def test_a_deleted_tenants_sealed_values_no_longer_open(
    keyring_file: Path, strataplane_database: str, sp_services: Services
) -> None:
    services = Services(sp_services.pool, Settings(database_url=sp_services.settings.database_url))
    seed = Seed(services)
    tenant_id = await _tenant(seed)
    kept = await _tenant(seed)
    async with tenant_transaction(services.pool, SCOPE, tenant_id) as conn:
        copies = [
            await sealed.get_sealed(conn, tenant_id, v.value_id)
            for v in await secret_store.versions(conn, tenant_id, "API_KEY")
        ]
    op = await tenants.delete_tenant(seed.system(), tenant_id)
    await jobs.run_tenant_deletion(services.pool, op.id, tenant_id)
    ring = secret_box.load_keyring(services.settings)
    async with platform_transaction(services.pool, SCOPE) as conn:
        box = Envelope(ring, TenantKeyStore(conn))
        for row in copies:
            assert row is not None
            with pytest.raises(DataKeyUnavailableError):
                await box.decrypt(tenant_id, sealed.sealed_bytes(row), owner=row.owner)
    async with await psycopg.AsyncConnection.connect(strataplane_database) as conn:
        cur = await conn.execute(
            "SELECT count(*) FROM strataplane.tenant_key WHERE tenant_id = %s", (tenant_id,)
        )
        left = await cur.fetchone()
    assert left == (0,)
    assert await _values(services, kept) == {1: "value-one", 2: "value-two"}


def test_a_running_process_sees_a_key_another_process_added(keyring_file: Path) -> None:
    settings = Settings()
    first = secret_box.load_keyring(settings)
    assert first.ids == [1]
    Keyring.load(keyring_file).add_key()  # what rotate-keyring does from the command line
    assert secret_box.load_keyring(settings).ids == [1, 2]
    assert secret_box.load_keyring(settings).active_id == 2


async def test_a_pool_at_a_collected_pools_address_still_records_the_keyring(
    database_factory: DatabaseFactory, strataplane_template: str
) -> None:
    """Databases come and go within one process (one per test); a new pool may be allocated at
    the address of one already collected, and must record the keyring in its own database all
    the same, or its first sealed value breaks tenant_key's foreign key."""
    urls = [database_factory.create(strataplane_template, stem="sp") for _ in range(2)]
    try:
        first = await open_pool(db.app_url(urls[0]), min_size=1, max_size=1)
        await secrets.keyring(Services(first, Settings()))
        address = id(first)
        await first.close()
        del first
        gc.collect()
        second = await _pool_at(address, db.app_url(urls[1]))
        try:
            seed = Seed(Services(second, Settings(), password_policy=FAST_TEST_POLICY))
            tenant, admin = await seed.tenant()
            await publish(second, tenant.id, TREE)
            await secrets.set_secret(seed.ctx(admin, tenant.id), "API_KEY", "value-one")
            async with platform_transaction(second, SCOPE) as conn:
                cur = await conn.execute("SELECT count(*) AS n FROM secret_key")
                assert (await cur.fetchone())["n"] >= 1
        finally:
            await second.close()
    finally:
        for url in urls:
            database_factory.drop(url)


async def _pool_at(address: int, url: str) -> Pool:
    """An open pool on ``url`` built in the memory at ``address`` when the allocator hands it
    back (within a few thousand objects it does), else anywhere."""
    shells: list[Pool] = []
    pool = None
    for _ in range(20_000):
        shell = object.__new__(AsyncConnectionPool)
        if id(shell) == address:
            pool = shell
            break
        shells.append(shell)
    pool = pool if pool is not None else object.__new__(AsyncConnectionPool)
    pool.__init__(  # type: ignore[misc]
        url,
        min_size=1,
        max_size=1,
        open=False,
        kwargs={"autocommit": True, "row_factory": dict_row},
    )
    await pool.open(wait=True)
    return pool
