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
    """The stored row, built from the values (no ``RETURNING``: nothing to wait for, so in a
    pipelined transaction the insert shares the round trip of the commit). With the message's
    ``message_accepted_at`` and a ``stream_seq``, the same statement also writes the sequence
    into the ``messages`` row where it is still NULL (05 §3 step 6), as the send path does."""
    row = {
        "id": receipt_id,
        "tenant_id": tenant_id,
        "msg_id": msg_id,
        "stream_seq": stream_seq,
        "issued_to_token": issued_to_token,
        "issued_at": issued_at,
        "signature": signature,
    }
    insert = f"""INSERT INTO receipts ({COLUMNS})
                 VALUES (%(id)s, %(tenant_id)s, %(msg_id)s, %(stream_seq)s, %(issued_to_token)s,
                         %(issued_at)s, %(signature)s)"""
    if message_accepted_at is None or stream_seq is None:
        await conn.execute(insert, row)
        return row
    await conn.execute(
        f"""WITH seq AS (
                UPDATE messages SET stream_seq = %(stream_seq)s
                 WHERE tenant_id = %(tenant_id)s AND id = %(msg_id)s
                   AND accepted_at = %(accepted_at)s AND stream_seq IS NULL)
            {insert}""",
        row | {"accepted_at": message_accepted_at},
    )
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
