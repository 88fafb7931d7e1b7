"""events: the transitions of each message (data model §2.3, kept in PostgreSQL by
docs/decisions/0047). The rows are written by the triggers of migration 0016, in the statement
that changes a message or its delivery state; this module only reads them."""

from __future__ import annotations

import uuid
from typing import Any

from platformkit.db.scope import Conn

Row = dict[str, Any]
EVENTS_MAX = 1000
"""The most events a trace shows (a message nakked without end stops at MaxDeliver long before)."""


async def message_events(conn: Conn, tenant_id: uuid.UUID, msg_id: uuid.UUID) -> list[Row]:
    """A message's events in the order they happened (time, then the order written)."""
    cur = await conn.execute(
        """SELECT event, event_time, attempt, actor, error_code, policy_id, details
             FROM events WHERE tenant_id = %s AND message_id = %s
            ORDER BY event_time, event_id LIMIT %s""",
        (tenant_id, msg_id, EVENTS_MAX),
    )
    return await cur.fetchall()
