"""conversations (data model §1.6). ``participants``, ``message_count`` and ``last_message_at``
belong to the ``messages_conversation_stats`` trigger: nothing here writes them."""

from __future__ import annotations

import uuid
from typing import Any

from platformkit.db.scope import Conn
from psycopg import AsyncCursor

Row = dict[str, Any]

COLUMNS = """id, tenant_id, workspace_id, started_by, title, participants, message_count,
    last_message_at, created_at"""


async def conversation_cursor(
    conn: Conn, tenant_id: uuid.UUID, conversation_id: uuid.UUID, *, lock: bool = False
) -> AsyncCursor[Row]:
    """The read of ``get_conversation``, its row fetched later: in pipeline mode the read
    travels with the statements that follow it, and ``fetchone`` costs no round trip of its
    own once a later statement's result arrived."""
    return await conn.execute(
        f"SELECT {COLUMNS} FROM conversations WHERE tenant_id = %s AND id = %s"
        + (" FOR UPDATE" if lock else ""),
        (tenant_id, conversation_id),
    )


async def conversations_cursor(
    conn: Conn, tenant_id: uuid.UUID, conversation_ids: list[uuid.UUID]
) -> AsyncCursor[Row]:
    """``conversation_cursor`` for several ids: the rows that exist, fetched later."""
    return await conn.execute(
        f"SELECT {COLUMNS} FROM conversations WHERE tenant_id = %s AND id = ANY(%s)",
        (tenant_id, conversation_ids),
    )


async def get_conversation(
    conn: Conn, tenant_id: uuid.UUID, conversation_id: uuid.UUID, *, lock: bool = False
) -> Row | None:
    cur = await conversation_cursor(conn, tenant_id, conversation_id, lock=lock)
    return await cur.fetchone()


async def insert_conversation(
    conn: Conn,
    tenant_id: uuid.UUID,
    conversation_id: uuid.UUID,
    *,
    workspace_id: uuid.UUID,
    started_by: uuid.UUID,
    title: str | None,
) -> Row | None:
    """The new row, or None when the id exists already, in this tenant or (invisibly) in
    another; one round trip either way."""
    cur = await conn.execute(
        f"""INSERT INTO conversations (id, tenant_id, workspace_id, started_by, title)
            VALUES (%s, %s, %s, %s, %s) ON CONFLICT (id) DO NOTHING RETURNING {COLUMNS}""",
        (conversation_id, tenant_id, workspace_id, started_by, title),
    )
    return await cur.fetchone()  # fetched, not rowcount: pipeline-safe


async def list_for_participant(
    conn: Conn, tenant_id: uuid.UUID, agent_id: uuid.UUID, *, limit: int
) -> list[Row]:
    """Newest ``last_message_at`` first."""
    cur = await conn.execute(
        f"""SELECT {COLUMNS} FROM conversations
            WHERE tenant_id = %s AND %s = ANY (participants)
            ORDER BY last_message_at DESC NULLS LAST, id DESC LIMIT %s""",
        (tenant_id, agent_id, limit),
    )
    return await cur.fetchall()


async def addresses_of(
    conn: Conn, tenant_id: uuid.UUID, agent_ids: list[uuid.UUID]
) -> dict[uuid.UUID, str]:
    cur = await conn.execute(
        "SELECT id, address FROM agents WHERE tenant_id = %s AND id = ANY(%s)",
        (tenant_id, agent_ids),
    )
    return {r["id"]: r["address"] for r in await cur.fetchall()}
