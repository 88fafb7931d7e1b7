"""receipts (data model §1.7): one row per receipt the gateway issued for a send."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from platformkit.db.scope import Conn

Row = dict[str, Any]

COLUMNS = "id, tenant_id, msg_id, stream_seq, issued_to_token, issued_at, signature"


async def insert_receipt(
    conn: Conn,
    tenant_id: uuid.UUID,
    *,
    receipt_id: uuid.UUID,
    msg_id: uuid.UUID,
    stream_seq: int | None,
    issued_to_token: uuid.UUID,
    issued_at: datetime,
    signature: bytes,
) -> Row:
    cur = await conn.execute(
        f"""INSERT INTO receipts (id, tenant_id, msg_id, stream_seq, issued_to_token, issued_at,
                                  signature)
            VALUES (%s, %s, %s, %s, %s, %s, %s) RETURNING {COLUMNS}""",
        (receipt_id, tenant_id, msg_id, stream_seq, issued_to_token, issued_at, signature),
    )
    row = await cur.fetchone()
    assert row is not None
    return row


async def latest_receipt(conn: Conn, tenant_id: uuid.UUID, msg_id: uuid.UUID) -> Row | None:
    cur = await conn.execute(
        f"""SELECT {COLUMNS} FROM receipts WHERE tenant_id = %s AND msg_id = %s
            ORDER BY issued_at DESC, id DESC LIMIT 1""",
        (tenant_id, msg_id),
    )
    return await cur.fetchone()


async def get_receipt(conn: Conn, tenant_id: uuid.UUID, receipt_id: uuid.UUID) -> Row | None:
    cur = await conn.execute(
        f"SELECT {COLUMNS} FROM receipts WHERE tenant_id = %s AND id = %s",
        (tenant_id, receipt_id),
    )
    return await cur.fetchone()
