"""Transaction scopes that tell row-level security whose rows a transaction may see.

Every tenant-scoped transaction sets the tenant with a transaction-local setting
(``set_config(name, value, true)``, the function form of ``SET LOCAL``) right after BEGIN, so
the value can never outlive the transaction and leak into the next user of a pooled connection.
Each system names its own settings (``strataplane.tenant``, ``app.tenant_id``, ...).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from psycopg import AsyncConnection
from psycopg_pool import AsyncConnectionPool

Pool = AsyncConnectionPool[AsyncConnection[dict[str, Any]]]
Conn = AsyncConnection[dict[str, Any]]


@dataclass(frozen=True)
class ScopeSettings:
    """Names of the transaction-local settings a system's RLS policies read."""

    tenant: str
    platform: str | None = None
    platform_value: str = "platform"


@asynccontextmanager
async def transaction(pool: Pool) -> AsyncIterator[Conn]:
    """A plain transaction with no tenant set: tenant tables show no rows in it."""
    async with pool.connection() as conn, conn.transaction():
        yield conn


@asynccontextmanager
async def tenant_transaction(
    pool: Pool, settings: ScopeSettings, tenant_id: UUID
) -> AsyncIterator[Conn]:
    """A transaction in which RLS shows only ``tenant_id``'s rows."""
    if not isinstance(tenant_id, UUID):
        raise TypeError("tenant_id must be a UUID")
    async with pool.connection() as conn, conn.transaction():
        await conn.execute("SELECT set_config(%s, %s, true)", (settings.tenant, str(tenant_id)))
        yield conn


@asynccontextmanager
async def platform_transaction(pool: Pool, settings: ScopeSettings) -> AsyncIterator[Conn]:
    """A transaction for platform code paths (credential lookup, shard scheduling, admin)."""
    if settings.platform is None:
        raise ValueError("this system has no platform scope")
    async with pool.connection() as conn, conn.transaction():
        await conn.execute(
            "SELECT set_config(%s, %s, true)", (settings.platform, settings.platform_value)
        )
        yield conn
