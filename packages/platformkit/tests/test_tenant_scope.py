"""Row-level security through tenant scopes, as the non-superuser application role."""

from __future__ import annotations

import uuid

import psycopg
import pytest
from platformkit.db.migrator import Migrator
from platformkit.db.pool import open_pool, with_user
from platformkit.db.scope import (
    ScopeSettings,
    platform_transaction,
    tenant_transaction,
    transaction,
)

SCOPE = ScopeSettings(tenant="kit.tenant", platform="kit.scope")
A, B = uuid.uuid4(), uuid.uuid4()


@pytest.fixture
async def app_pool(fresh_database: str, kit_migrator: Migrator):  # type: ignore[no-untyped-def]
    await kit_migrator.migrate(fresh_database)
    with psycopg.connect(fresh_database, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO notes (tenant_id, body) VALUES (%s, 'a1'), (%s, 'a2'), (%s, 'b1')",
            (A, A, B),
        )
    # One connection, so every transaction below reuses the same pooled session.
    pool = await open_pool(with_user(fresh_database, "kit_app"), min_size=1, max_size=1)
    yield pool
    await pool.close()


async def test_app_role_is_not_superuser(app_pool) -> None:  # type: ignore[no-untyped-def]
    async with transaction(app_pool) as conn:
        row = await (
            await conn.execute(
                "SELECT rolsuper, rolbypassrls FROM pg_roles WHERE rolname = current_user"
            )
        ).fetchone()
    assert row == {"rolsuper": False, "rolbypassrls": False}


async def test_no_tenant_sees_nothing(app_pool) -> None:  # type: ignore[no-untyped-def]
    async with transaction(app_pool) as conn:
        rows = await (await conn.execute("SELECT body FROM notes")).fetchall()
    assert rows == []


async def test_tenant_sees_only_its_rows_and_cannot_write_others(app_pool) -> None:  # type: ignore[no-untyped-def]
    async with tenant_transaction(app_pool, SCOPE, A) as conn:
        rows = await (await conn.execute("SELECT body FROM notes ORDER BY body")).fetchall()
    assert [r["body"] for r in rows] == ["a1", "a2"]
    with pytest.raises(psycopg.errors.InsufficientPrivilege, match="row-level security"):
        async with tenant_transaction(app_pool, SCOPE, A) as conn:
            await conn.execute("INSERT INTO notes (tenant_id, body) VALUES (%s, 'sneaky')", (B,))
    async with tenant_transaction(app_pool, SCOPE, A) as conn:
        cur = await conn.execute("UPDATE notes SET body = 'x' WHERE tenant_id = %s", (B,))
        assert cur.rowcount == 0


async def test_setting_does_not_leak_into_next_transaction(app_pool) -> None:  # type: ignore[no-untyped-def]
    async with tenant_transaction(app_pool, SCOPE, A) as conn:
        assert len(await (await conn.execute("SELECT 1 FROM notes")).fetchall()) == 2
        first_pid = conn.info.backend_pid
    async with transaction(app_pool) as conn:
        assert conn.info.backend_pid == first_pid  # the same pooled session
        assert await (await conn.execute("SELECT 1 FROM notes")).fetchall() == []
        setting = await (
            await conn.execute("SELECT current_setting('kit.tenant', true) AS v")
        ).fetchone()
        assert setting is not None
        assert setting["v"] in ("", None)


async def test_platform_scope_sees_all(app_pool) -> None:  # type: ignore[no-untyped-def]
    async with platform_transaction(app_pool, SCOPE) as conn:
        rows = await (await conn.execute("SELECT count(*) AS n FROM notes")).fetchone()
    assert rows == {"n": 3}
