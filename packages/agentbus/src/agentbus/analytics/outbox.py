"""The analytics outbox in PostgreSQL (migration 0021): which tenants have rows queued, one
tenant's oldest rows, and deleting them once ClickHouse holds them. Every read and delete runs
in the tenant's scope (RLS); only the tenant list crosses tenants, through a lookup function."""

from __future__ import annotations

import uuid
from typing import Any

from platformkit.db.scope import Conn
from psycopg.types.string import TextLoader

Row = dict[str, Any]


async def tenants_with_rows(conn: Conn) -> list[Row]:
    cur = await conn.execute("SELECT tenant_id, queued FROM analytics_outbox_tenants()")
    return list(await cur.fetchall())


async def take(conn: Conn, tenant_id: uuid.UUID, limit: int) -> list[Row]:
    """The tenant's oldest rows, each ``row`` as the JSON text PostgreSQL sent (parsed by
    ``rows.parse_row``, faster than the driver's own JSON loader)."""
    async with conn.cursor() as cur:
        cur.adapters.register_loader("jsonb", TextLoader)
        await cur.execute(
            """SELECT seq, target, row FROM analytics_outbox
                WHERE tenant_id = %s ORDER BY seq LIMIT %s""",
            (tenant_id, limit),
        )
        return list(await cur.fetchall())


async def delete_through(conn: Conn, tenant_id: uuid.UUID, last_seq: int) -> None:
    await conn.execute(
        "DELETE FROM analytics_outbox WHERE tenant_id = %s AND seq <= %s", (tenant_id, last_seq)
    )


async def retention_days(conn: Conn, tenant_id: uuid.UUID) -> int:
    cur = await conn.execute("SELECT retention_days FROM tenants WHERE id = %s", (tenant_id,))
    row = await cur.fetchone()
    return 7 if row is None else int(row["retention_days"])


async def queued(conn: Conn, tenant_id: uuid.UUID) -> int:
    cur = await conn.execute(
        "SELECT count(*) AS n FROM analytics_outbox WHERE tenant_id = %s", (tenant_id,)
    )
    row = await cur.fetchone()
    return 0 if row is None else int(row["n"])


async def model_pricing(conn: Conn) -> list[Row]:
    """The platform's price list (a platform table the gateway may read)."""
    cur = await conn.execute(
        """SELECT provider, model, effective_from::text AS effective_from,
                  input_per_mtok::text AS input_per_mtok, output_per_mtok::text AS output_per_mtok,
                  cache_read_per_mtok::text AS cache_read_per_mtok,
                  cache_write_per_mtok::text AS cache_write_per_mtok
             FROM model_pricing ORDER BY provider, model, effective_from"""
    )
    return list(await cur.fetchall())
