"""support_consents: time-boxed windows in which support staff may read a tenant's rows
(data model §1.9, §1.10). Row-level security on every tenant table lets the support role read
only while one of its tenant's windows is open."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from platformkit.db.scope import Conn
from platformkit.ids import uuid7
from psycopg.types.json import Jsonb

Row = dict[str, Any]
COLUMNS = "id, tenant_id, granted_by, scope, starts_at, ends_at, revoked_at, ticket_ref"


async def insert_consent(
    conn: Conn, tenant_id: uuid.UUID, *, granted_by: uuid.UUID, scope: dict[str, Any],
    starts_at: datetime, ends_at: datetime, ticket_ref: str | None,
) -> Row:  # fmt: skip
    cur = await conn.execute(
        f"""INSERT INTO support_consents (id, tenant_id, granted_by, scope, starts_at, ends_at,
                                          ticket_ref)
            VALUES (%s, %s, %s, %s, %s, %s, %s) RETURNING {COLUMNS}""",
        (uuid7(), tenant_id, granted_by, Jsonb(scope), starts_at, ends_at, ticket_ref),
    )
    row = await cur.fetchone()
    assert row is not None
    return row


async def list_consents(conn: Conn, tenant_id: uuid.UUID) -> list[Row]:
    cur = await conn.execute(
        f"SELECT {COLUMNS} FROM support_consents WHERE tenant_id = %s ORDER BY starts_at DESC",
        (tenant_id,),
    )
    return list(await cur.fetchall())


async def revoke_consent(conn: Conn, tenant_id: uuid.UUID, consent_id: uuid.UUID) -> Row | None:
    cur = await conn.execute(
        f"""UPDATE support_consents SET revoked_at = COALESCE(revoked_at, now())
             WHERE tenant_id = %s AND id = %s RETURNING {COLUMNS}""",
        (tenant_id, consent_id),
    )
    return await cur.fetchone()


async def open_consent(conn: Conn, tenant_id: uuid.UUID) -> Row | None:
    """The open window that ends last (what the support role can see of them)."""
    cur = await conn.execute(
        f"""SELECT {COLUMNS} FROM support_consents
             WHERE tenant_id = %s AND now() BETWEEN starts_at AND ends_at AND revoked_at IS NULL
             ORDER BY ends_at DESC LIMIT 1""",
        (tenant_id,),
    )
    return await cur.fetchone()
