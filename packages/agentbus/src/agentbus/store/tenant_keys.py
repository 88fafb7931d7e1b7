"""tenant_keys: a tenant's data keys (DEKs), stored wrapped by the KEK (data model §5.1, §5.3).

Versions count up from 1 and are never reused; one row is ``active``; rotation retires it;
crypto-shredding marks every row ``destroyed`` and overwrites the wrapped key with zeros.
"""

from __future__ import annotations

import uuid
from typing import Any

from platformkit.db.scope import Conn
from psycopg import AsyncCursor

Row = dict[str, Any]

COLUMNS = "tenant_id, version, dek_wrapped, kek_ref, kek_provider, status, created_at, retired_at"


async def next_version(conn: Conn, tenant_id: uuid.UUID) -> int:
    """Call with the tenant row locked (``tenants.lock_tenant``) so two rotations take turns."""
    cur = await conn.execute(
        "SELECT COALESCE(max(version), 0) + 1 AS v FROM tenant_keys WHERE tenant_id = %s",
        (tenant_id,),
    )
    row = await cur.fetchone()
    assert row is not None
    return int(row["v"])


async def retire_active(conn: Conn, tenant_id: uuid.UUID) -> None:
    await conn.execute(
        """UPDATE tenant_keys SET status = 'retired', retired_at = now()
           WHERE tenant_id = %s AND status = 'active'""",
        (tenant_id,),
    )


async def insert_key(
    conn: Conn,
    tenant_id: uuid.UUID,
    version: int,
    *,
    dek_wrapped: bytes,
    kek_ref: str,
    kek_provider: str = "platform",
) -> Row:
    cur = await conn.execute(
        f"""INSERT INTO tenant_keys (tenant_id, version, dek_wrapped, kek_ref, kek_provider)
            VALUES (%s, %s, %s, %s, %s) RETURNING {COLUMNS}""",
        (tenant_id, version, dek_wrapped, kek_ref, kek_provider),
    )
    row = await cur.fetchone()
    assert row is not None
    return row


async def key_row(conn: Conn, tenant_id: uuid.UUID, version: int | None) -> Row | None:
    """A usable version (``None``: the active one), with its tenant's current ``kek_ref`` as
    ``tenant_kek_ref``."""
    return await (await key_cursor(conn, tenant_id, version)).fetchone()


async def key_cursor(conn: Conn, tenant_id: uuid.UUID, version: int | None) -> AsyncCursor[Row]:
    """``key_row``, fetched later."""
    return await conn.execute(
        f"""SELECT k.{COLUMNS.replace(", ", ", k.")}, t.kek_ref AS tenant_kek_ref
              FROM tenant_keys k JOIN tenants t ON t.id = k.tenant_id
             WHERE k.tenant_id = %(t)s AND k.status <> 'destroyed'
               AND (CASE WHEN %(v)s::int IS NULL THEN k.status = 'active'
                         ELSE k.version = %(v)s END)
             ORDER BY k.version DESC LIMIT 1""",
        {"t": tenant_id, "v": version},
    )


async def usable_rows(conn: Conn, tenant_id: uuid.UUID) -> list[Row]:
    cur = await conn.execute(
        f"""SELECT {COLUMNS} FROM tenant_keys WHERE tenant_id = %s AND status <> 'destroyed'
             ORDER BY version""",
        (tenant_id,),
    )
    return list(await cur.fetchall())


async def rewrap(
    conn: Conn, tenant_id: uuid.UUID, version: int, old: bytes, *, wrapped: bytes,
    kek_ref: str, kek_provider: str,
) -> bool:  # fmt: skip
    """Replace one version's wrapping, only if it is still ``old`` (another process may have
    re-wrapped it first); whether this call did."""
    cur = await conn.execute(
        """UPDATE tenant_keys SET dek_wrapped = %s, kek_ref = %s, kek_provider = %s
            WHERE tenant_id = %s AND version = %s AND dek_wrapped = %s AND status <> 'destroyed'
           RETURNING version""",
        (wrapped, kek_ref, kek_provider, tenant_id, version, old),
    )
    return await cur.fetchone() is not None


async def destroy_keys(conn: Conn, tenant_id: uuid.UUID) -> int:
    """Crypto-shred (data model §5.5 step 2); returns how many keys were destroyed."""
    cur = await conn.execute(
        """UPDATE tenant_keys
              SET status = 'destroyed', retired_at = COALESCE(retired_at, now()),
                  dek_wrapped = decode(repeat('00', length(dek_wrapped)), 'hex')
            WHERE tenant_id = %s AND status <> 'destroyed'""",
        (tenant_id,),
    )
    return cur.rowcount
