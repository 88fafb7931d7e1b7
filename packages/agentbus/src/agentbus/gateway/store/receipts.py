"""receipts (data model §1.7): one row per receipt the gateway issued for a send."""

from __future__ import annotations

import uuid
from typing import Any

from platformkit.db.scope import Conn

Row = dict[str, Any]

COLUMNS = "id, tenant_id, msg_id, stream_seq, issued_to_token, issued_at, signature"


async def insert_receipts(conn: Conn, tenant_id: uuid.UUID, rows: list[Row]) -> None:
    """Insert receipt rows (``id``, ``msg_id``, ``stream_seq``, ``issued_at``, ``signature``,
    ``issued_to_token`` and ``message_accepted_at``) with ``record_receipts`` (migrations 0008
    and 0025), which sets the tenant scope itself: one statement on an autocommit connection,
    or one more statement inside the caller's transaction for the same tenant. Where a row has
    a ``stream_seq`` and its message's ``message_accepted_at``, the sequence is also written
    into the ``messages`` row where it is still NULL (05 §3 step 6), as the send path does. The
    arrays travel in binary (``%b``): psycopg builds a text array in Python, element by
    element, at 2-3 µs each.

    The rows go in message id order, which is the order the function locks the messages in: a
    call may hold the receipts of many agents' sends, and a pull or a settle of the same
    messages in another process locks them in that order too, so neither waits on the other in
    a cycle (a deadlock, which PostgreSQL ends by failing one of them)."""
    rows = sorted(rows, key=lambda r: r["msg_id"])
    await conn.execute(
        """SELECT record_receipts(%s, %b::uuid[], %b::uuid[], %b::uuid[], %b::bigint[],
                                  %b::timestamptz[], %b::bytea[], %b::timestamptz[])""",
        (
            tenant_id,
            [r["issued_to_token"] for r in rows],
            [r["id"] for r in rows],
            [r["msg_id"] for r in rows],
            [r["stream_seq"] for r in rows],
            [r["issued_at"] for r in rows],
            [r["signature"] for r in rows],
            [r["message_accepted_at"] for r in rows],
        ),
    )


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


async def receipts_of(conn: Conn, tenant_id: uuid.UUID, msg_id: uuid.UUID) -> list[Row]:
    """Every receipt issued for a message, oldest first."""
    cur = await conn.execute(
        f"""SELECT {COLUMNS} FROM receipts WHERE tenant_id = %s AND msg_id = %s
            ORDER BY issued_at, id""",
        (tenant_id, msg_id),
    )
    return await cur.fetchall()
