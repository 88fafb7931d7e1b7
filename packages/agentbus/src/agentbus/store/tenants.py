"""tenants: the tenancy root. Under RLS a tenant sees only its own row; the platform-wide list
goes through the ``platform_tenants()`` function."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from platformkit.db.scope import Conn
from psycopg import AsyncCursor
from psycopg.types.json import Jsonb

Row = dict[str, Any]

COLUMNS = """id, slug, display_name, plan, status, region, retention_days, nats_stream,
    nats_account, kek_ref, custom_domain, settings, created_at, updated_at, deleted_at"""


def nats_stream_name(tenant_id: uuid.UUID) -> str:
    """``T_`` and the id without hyphens (data model §1.3)."""
    return f"T_{tenant_id.hex}"


async def insert_tenant(
    conn: Conn,
    tenant_id: uuid.UUID,
    *,
    slug: str,
    display_name: str,
    plan: str,
    region: str,
    retention_days: int,
    kek_ref: str,
) -> Row:
    """Run in the new tenant's own scope: the row must pass ``id = current_tenant_id()``."""
    cur = await conn.execute(
        f"""INSERT INTO tenants (id, slug, display_name, plan, region, retention_days,
                                 nats_stream, kek_ref)
            VALUES (%s, %s, %s, %s, %s, %s, %s, %s) RETURNING {COLUMNS}""",
        (
            tenant_id,
            slug,
            display_name,
            plan,
            region,
            retention_days,
            nats_stream_name(tenant_id),
            kek_ref,
        ),
    )
    row = await cur.fetchone()
    assert row is not None
    return row


async def tenant_cursor(conn: Conn, tenant_id: uuid.UUID) -> AsyncCursor[Row]:
    """``get_tenant``, fetched later."""
    return await conn.execute(f"SELECT {COLUMNS} FROM tenants WHERE id = %s", (tenant_id,))


async def get_tenant(conn: Conn, tenant_id: uuid.UUID) -> Row | None:
    return await (await tenant_cursor(conn, tenant_id)).fetchone()


async def lock_tenant(conn: Conn, tenant_id: uuid.UUID) -> Row | None:
    """The tenant row, locked until commit (serialises key rotation and status changes)."""
    cur = await conn.execute(
        f"SELECT {COLUMNS} FROM tenants WHERE id = %s FOR UPDATE", (tenant_id,)
    )
    return await cur.fetchone()


async def set_tenant_status(
    conn: Conn, tenant_id: uuid.UUID, status: str, *, only_from: Sequence[str]
) -> Row | None:
    """Change the status if it is one of ``only_from``; None when the row is not there or not
    in such a state."""
    cur = await conn.execute(
        f"""UPDATE tenants SET status = %s, updated_at = now()
            WHERE id = %s AND status::text = ANY(%s) RETURNING {COLUMNS}""",
        (status, tenant_id, list(only_from)),
    )
    return await cur.fetchone()


async def list_all_tenants(conn: Conn) -> list[Row]:
    """Every tenant, oldest first; the one cross-tenant read of this table (platform operator)."""
    cur = await conn.execute(f"SELECT {COLUMNS} FROM platform_tenants()")
    return await cur.fetchall()


async def update_tenant(conn: Conn, tenant_id: uuid.UUID, changes: dict[str, Any]) -> Row | None:
    """Set the given columns (``display_name``, ``settings``, ``retention_days``); the row."""
    names = [n for n in ("display_name", "settings", "retention_days") if n in changes]
    values = [Jsonb(changes[n]) if n == "settings" else changes[n] for n in names]
    assignments = "".join(f"{name} = %s, " for name in names)
    cur = await conn.execute(
        f"""UPDATE tenants SET {assignments}updated_at = now()
             WHERE id = %s RETURNING {COLUMNS}""",
        [*values, tenant_id],
    )
    return await cur.fetchone()


async def set_kek_ref(conn: Conn, tenant_id: uuid.UUID, kek_ref: str) -> None:
    """The tenant's key encryption key (data model §5.1); the caller re-wraps its data keys."""
    await conn.execute(
        "UPDATE tenants SET kek_ref = %s, updated_at = now() WHERE id = %s", (kek_ref, tenant_id)
    )
