"""Removing a tenant's data: every table with a tenant_id, children before parents, the tenant
row last (spec: tenant_state 'deleting').

The order comes from the catalog's foreign keys, so tables added by later migrations are
included without touching this module. platform_audit_event keeps its rows: its tenant_id has
no foreign key and outlives the tenant. Run in platform scope.
"""

from __future__ import annotations

from uuid import UUID

from platformkit.db.scope import Conn
from psycopg import sql

from strataplane.db import SCHEMA

KEPT = frozenset({"platform_audit_event"})

_TABLES = """
SELECT c.relname AS name FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
JOIN pg_attribute a ON a.attrelid = c.oid AND a.attname = 'tenant_id' AND NOT a.attisdropped
WHERE n.nspname = %s AND c.relkind IN ('r', 'p') AND NOT c.relispartition
"""
_EDGES = """
SELECT child.relname AS child, parent.relname AS parent FROM pg_constraint k
JOIN pg_class child ON child.oid = k.conrelid JOIN pg_class parent ON parent.oid = k.confrelid
JOIN pg_namespace n ON n.oid = child.relnamespace
WHERE k.contype = 'f' AND n.nspname = %s AND k.conrelid <> k.confrelid
"""


async def deletion_order(conn: Conn) -> list[str]:
    """Tenant tables, each after every table that references it."""
    tables = {r["name"] for r in await (await conn.execute(_TABLES, (SCHEMA,))).fetchall()}
    tables -= KEPT
    referenced_by: dict[str, set[str]] = {t: set() for t in tables}
    for edge in await (await conn.execute(_EDGES, (SCHEMA,))).fetchall():
        if edge["child"] in tables and edge["parent"] in tables:
            referenced_by[edge["parent"]].add(edge["child"])
    order: list[str] = []
    remaining = set(tables)
    while remaining:
        ready = sorted(t for t in remaining if not (referenced_by[t] & remaining))
        if not ready:  # a reference cycle (none today): let ON DELETE actions resolve it
            ready = sorted(remaining)
        order += ready
        remaining -= set(ready)
    return order


async def purge_tenant(conn: Conn, tenant_id: UUID) -> dict[str, int]:
    """Delete every row of the tenant, then its service accounts' users, then the tenant."""
    service_users = [
        r["id"]
        for r in await (
            await conn.execute("SELECT id FROM service_account WHERE tenant_id = %s", (tenant_id,))
        ).fetchall()
    ]
    deleted: dict[str, int] = {}
    for table in await deletion_order(conn):
        cur = await conn.execute(
            sql.SQL("DELETE FROM {} WHERE tenant_id = %s").format(sql.Identifier(SCHEMA, table)),
            (tenant_id,),
        )
        deleted[table] = cur.rowcount
    cur = await conn.execute("DELETE FROM app_user WHERE id = ANY(%s)", (service_users,))
    deleted["app_user"] = cur.rowcount
    cur = await conn.execute("DELETE FROM tenant WHERE id = %s", (tenant_id,))
    deleted["tenant"] = cur.rowcount
    return deleted
