"""Row-level security as the gateway role: no tenant set sees nothing, and tenant A can neither
read nor write tenant B's rows, in every table with a tenant_id (and tenants itself)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import psycopg
import pytest
from agentbus import db
from agentbus.testing import SEEDED_TABLES, Statement, agentbus_template, seed_tenant
from platformkit.db.scope import Pool, tenant_transaction, transaction
from platformkit.testing.databases import DatabaseFactory
from psycopg import sql

APPEND_ONLY = {
    "audit_actions": {"UPDATE", "DELETE"},
    "audit_chain": {"UPDATE", "DELETE"},
    "task_transitions": {"UPDATE"},
    "usage": {"UPDATE"},
    "analytics_outbox": {"UPDATE"},
    "events": {"UPDATE"},
}


@dataclass
class Seeded:
    url: str
    a: uuid.UUID
    b: uuid.UUID
    b_rows: list[Statement]


def tenant_column(table: str) -> str:
    return "id" if table == "tenants" else "tenant_id"


async def expect_rls_violation(
    app: Pool, tenant: uuid.UUID, table: str, query: Any, params: Any
) -> None:
    try:
        async with tenant_transaction(app, db.SCOPE, tenant) as conn:
            await conn.execute(query, params)
    except psycopg.errors.InsufficientPrivilege as exc:
        error = str(exc)
    else:
        pytest.fail(f"{table}: a write for another tenant went through")
    assert "row-level security" in error, table


@pytest.fixture(scope="module")
async def seeded(database_factory: DatabaseFactory) -> AsyncIterator[Seeded]:
    url = database_factory.create(await agentbus_template(database_factory), stem="agentbus_rls")
    a, _ = await seed_tenant(url, "tenant-a")
    b, b_rows = await seed_tenant(url, "tenant-b")
    yield Seeded(url, a, b, b_rows)
    database_factory.drop(url)


@pytest.fixture(scope="module")
async def app(seeded: Seeded) -> AsyncIterator[Pool]:
    pool = await db.open_app_pool(seeded.url, max_size=1)
    yield pool
    await pool.close()


def test_seed_covers_every_tenant_table(seeded: Seeded) -> None:
    with psycopg.connect(seeded.url) as conn:
        tables = {
            r[0]
            for r in conn.execute(
                """SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
               WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p') AND NOT c.relispartition
                 AND EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = c.oid
                             AND a.attname = 'tenant_id' AND NOT a.attisdropped)"""
            ).fetchall()
        }
        for table in SEEDED_TABLES:  # the administrator sees both tenants: the seed is real
            query = sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(table))
            assert conn.execute(query).fetchone() == (2,), table
    assert tables | {"tenants"} == set(SEEDED_TABLES)


async def test_app_role_is_neither_superuser_nor_bypassrls(app: Pool) -> None:
    async with transaction(app) as conn:
        row = await (
            await conn.execute(
                "SELECT current_user AS u, rolsuper, rolbypassrls FROM pg_roles"
                " WHERE rolname = current_user"
            )
        ).fetchone()
    assert row == {"u": "agentbus_app", "rolsuper": False, "rolbypassrls": False}


async def test_no_tenant_set_sees_zero_rows_in_every_tenant_table(app: Pool) -> None:
    async with transaction(app) as conn:
        for table in SEEDED_TABLES:
            query = sql.SQL("SELECT count(*) AS n FROM {}").format(sql.Identifier(table))
            assert await (await conn.execute(query)).fetchone() == {"n": 0}, table


async def test_tenant_reads_only_its_own_rows(app: Pool, seeded: Seeded) -> None:
    async with tenant_transaction(app, db.SCOPE, seeded.a) as conn:
        for table in SEEDED_TABLES:
            query = sql.SQL("SELECT {} AS t FROM {}").format(
                sql.Identifier(tenant_column(table)), sql.Identifier(table)
            )
            rows = await (await conn.execute(query)).fetchall()
            assert rows == [{"t": seeded.a}], table
            query = sql.SQL("SELECT count(*) AS n FROM {} WHERE {} = %s").format(
                sql.Identifier(table), sql.Identifier(tenant_column(table))
            )
            assert await (await conn.execute(query, (seeded.b,))).fetchone() == {"n": 0}, table


async def test_tenant_cannot_insert_rows_for_another(app: Pool, seeded: Seeded) -> None:
    for table, statement, params in seeded.b_rows:
        await expect_rls_violation(app, seeded.a, table, statement, params)


@pytest.mark.parametrize("verb", ["UPDATE", "DELETE"])
async def test_tenant_cannot_change_rows_of_another(app: Pool, seeded: Seeded, verb: str) -> None:
    for table in SEEDED_TABLES:
        column = sql.Identifier(tenant_column(table))
        template = (
            "UPDATE {t} SET {c} = {c} WHERE {c} = %s"
            if verb == "UPDATE"
            else ("DELETE FROM {t} WHERE {c} = %s")
        )
        query = sql.SQL(template).format(t=sql.Identifier(table), c=column)
        if verb in APPEND_ONLY.get(table, ()):
            with pytest.raises(psycopg.errors.InsufficientPrivilege, match="permission denied"):
                async with tenant_transaction(app, db.SCOPE, seeded.a) as conn:
                    await conn.execute(query, (seeded.b,))
            continue
        async with tenant_transaction(app, db.SCOPE, seeded.a) as conn:
            assert (await conn.execute(query, (seeded.b,))).rowcount == 0, table


async def test_tenant_cannot_move_its_rows_to_another(app: Pool, seeded: Seeded) -> None:
    for table in SEEDED_TABLES:
        if "UPDATE" in APPEND_ONLY.get(table, ()):
            continue
        query = sql.SQL("UPDATE {t} SET {c} = %s WHERE {c} = %s").format(
            t=sql.Identifier(table), c=sql.Identifier(tenant_column(table))
        )
        await expect_rls_violation(app, seeded.a, table, query, (seeded.b, seeded.a))


async def test_partitions_are_reachable_only_through_messages(app: Pool, seeded: Seeded) -> None:
    with psycopg.connect(seeded.url) as conn:
        parts = [
            r[0]
            for r in conn.execute(
                "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid"
                " WHERE i.inhparent = 'messages'::regclass"
            ).fetchall()
        ]
    assert len(parts) >= 4
    for part in parts:
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="permission denied"):
            async with tenant_transaction(app, db.SCOPE, seeded.a) as conn:
                await conn.execute(sql.SQL("SELECT 1 FROM {}").format(sql.Identifier(part)))


@pytest.mark.parametrize("table", ["plans", "signing_keys"])
async def test_platform_tables_are_closed_to_the_app(app: Pool, table: str) -> None:
    with pytest.raises(psycopg.errors.InsufficientPrivilege, match="permission denied"):
        async with transaction(app) as conn:
            await conn.execute(sql.SQL("SELECT * FROM {}").format(sql.Identifier(table)))


async def test_platform_tables_are_read_through_views(app: Pool) -> None:
    async with transaction(app) as conn:
        plans = await (await conn.execute("SELECT code::text AS code FROM plan_limits")).fetchall()
        await conn.execute("SELECT kid, public_key FROM signing_keys_public")
        await conn.execute("SELECT kid, private_key_enc FROM signing_keys_usable")
    assert sorted(p["code"] for p in plans) == ["business", "enterprise", "starter"]


async def test_token_lookup_crosses_tenants_only_by_hash(app: Pool, seeded: Seeded) -> None:
    b_hash = next(p["h"] for t, _s, p in seeded.b_rows if t == "integration_tokens")
    async with transaction(app) as conn:
        found = await (
            await conn.execute(
                "SELECT tenant_id, tenant_status::text AS s FROM lookup_integration_token(%s)",
                (b_hash,),
            )
        ).fetchall()
        flag = await (
            await conn.execute("SELECT current_setting('agentbus.lookup', true) AS v")
        ).fetchone()
        # The flag opens nothing for the app role itself.
        await conn.execute("SELECT set_config('agentbus.lookup', 'on', true)")
        seen = await (await conn.execute("SELECT count(*) AS n FROM integration_tokens")).fetchone()
    assert found == [{"tenant_id": seeded.b, "s": "active"}]
    assert flag == {"v": "off"}
    assert seen == {"n": 0}
