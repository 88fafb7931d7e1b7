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
    message_accepted_at: datetime | None = None,
) -> Row:
    """The stored row, built from the values, written by ``record_receipt`` (migration 0007),
    which sets the tenant scope itself: one statement on an autocommit connection, or one more
    statement inside the caller's transaction for the same tenant. With the message's
    ``message_accepted_at`` and a ``stream_seq``, it also writes the sequence into the
    ``messages`` row where it is still NULL (05 §3 step 6), as the send path does."""
    row = {
        "id": receipt_id,
        "tenant_id": tenant_id,
        "msg_id": msg_id,
        "stream_seq": stream_seq,
        "issued_to_token": issued_to_token,
        "issued_at": issued_at,
        "signature": signature,
    }
    await conn.execute(
        "SELECT record_receipt(%s, %s, %s, %s, %s, %s, %s, %s)",
        (tenant_id, receipt_id, msg_id, stream_seq, issued_to_token, issued_at, signature,
         message_accepted_at),
    )  # fmt: skip
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
