"""The support role reads a tenant's rows only while that tenant has an open consent window
(support_read), can never widen that by setting app.tenant_id itself
(support_consent_required), and writes nothing but its own audit actions."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import psycopg
import pytest
from agentbus import db
from agentbus.testing import SEEDED_TABLES, agentbus_template, seed_tenant
from platformkit.db.pool import open_pool
from platformkit.db.scope import Pool, tenant_transaction, transaction
from platformkit.ids import uuid7
from platformkit.testing.databases import DatabaseFactory
from psycopg import sql

KEY_TABLES = ("tenant_keys", "a2a_bridges")  # wrapped keys are of no use to a support reader
READABLE = [t for t in SEEDED_TABLES if t not in KEY_TABLES]


@dataclass
class World:
    url: str
    a: uuid.UUID
    b: uuid.UUID
    support: Pool

    def consent(self, tenant: uuid.UUID, starts: timedelta, ends: timedelta, revoked: bool) -> None:
        now = datetime.now(UTC)
        with psycopg.connect(self.url) as conn:
            user = conn.execute("SELECT id FROM users WHERE tenant_id = %s", (tenant,)).fetchone()
            assert user is not None
            conn.execute(
                "INSERT INTO support_consents (id, tenant_id, granted_by, scope, starts_at,"
                " ends_at, revoked_at) VALUES (%s, %s, %s, '{}', %s, %s, %s)",
                (uuid7(), tenant, user[0], now + starts, now + ends, now if revoked else None),
            )


@pytest.fixture
async def world(database_factory: DatabaseFactory) -> AsyncIterator[World]:
    url = database_factory.create(await agentbus_template(database_factory), stem="agentbus_sup")
    a, _ = await seed_tenant(url, "tenant-a")
    b, _ = await seed_tenant(url, "tenant-b")
    pool = await open_pool(db.support_url(url), min_size=1, max_size=1)
    yield World(url, a, b, pool)
    await pool.close()
    database_factory.drop(url)


async def visible(pool: Pool, table: str, as_tenant: uuid.UUID | None = None) -> list[uuid.UUID]:
    column = "id" if table == "tenants" else "tenant_id"
    query = sql.SQL("SELECT {} AS t FROM {}").format(sql.Identifier(column), sql.Identifier(table))
    if as_tenant is None:
        async with transaction(pool) as conn:
            rows = await (await conn.execute(query)).fetchall()
    else:
        async with tenant_transaction(pool, db.SCOPE, as_tenant) as conn:
            rows = await (await conn.execute(query)).fetchall()
    return [r["t"] for r in rows]


async def test_without_open_consent_support_sees_nothing(world: World) -> None:
    world.consent(world.a, timedelta(hours=1), timedelta(hours=2), revoked=False)  # not yet
    world.consent(world.b, timedelta(hours=-1), timedelta(hours=1), revoked=True)  # revoked
    for table in READABLE:
        assert await visible(world.support, table) == [], table
        # Setting the tenant itself does not stand in for consent.
        assert await visible(world.support, table, as_tenant=world.a) == [], table


async def test_open_consent_shows_that_tenant_only(world: World) -> None:
    world.consent(world.a, timedelta(hours=-1), timedelta(hours=1), revoked=False)
    for table in READABLE:
        # One row per table; for support_consents the seed's own window is closed, so only
        # the open one shows.
        assert await visible(world.support, table) == [world.a], table
        assert world.b not in await visible(world.support, table, as_tenant=world.b), table


async def test_support_keeps_away_from_keys_and_cannot_write(world: World) -> None:
    world.consent(world.a, timedelta(hours=-1), timedelta(hours=1), revoked=False)
    for table in KEY_TABLES:
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="permission denied"):
            await visible(world.support, table)
    with pytest.raises(psycopg.errors.InsufficientPrivilege, match="permission denied"):
        async with tenant_transaction(world.support, db.SCOPE, world.a) as conn:
            await conn.execute("UPDATE agents SET description = 'x'")


@pytest.mark.parametrize(("tenant", "allowed"), [("a", True), ("b", False)])
async def test_support_audits_only_where_consent_is_open(
    world: World, tenant: str, allowed: bool
) -> None:
    world.consent(world.a, timedelta(hours=-1), timedelta(hours=1), revoked=False)
    tid = world.a if tenant == "a" else world.b
    insert = (
        "INSERT INTO audit_actions (id, tenant_id, actor_type, actor_id, action)"
        " VALUES (%s, %s, 'support', 'staff-7', 'support.view_payload')"
    )
    if allowed:
        async with tenant_transaction(world.support, db.SCOPE, tid) as conn:
            await conn.execute(insert, (uuid7(), tid))
        return
    with pytest.raises(psycopg.errors.InsufficientPrivilege, match="row-level security"):
        async with tenant_transaction(world.support, db.SCOPE, tid) as conn:
            await conn.execute(insert, (uuid7(), tid))
