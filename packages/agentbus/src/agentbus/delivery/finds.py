"""The controllers' finds (05 §7.1, §8): candidate messages of one tenant, on a connection in
that tenant's scope. Acts re-read each row under lock (``store.lock_any``) before changing it.
"""

from __future__ import annotations

import uuid
from typing import Any

from platformkit.db.scope import Conn

Row = dict[str, Any]

_DUE = """SELECT m.id, m.accepted_at, m.type, m.status::text AS status, m.to_agent_id,
        m.stream_seq, m.expires_at FROM messages m"""


async def due_expiries(conn: Conn, tenant_id: uuid.UUID, limit: int) -> list[Row]:
    """Undelivered messages past ``expires_at``, and those without one that are within a day of
    the tenant's retention (05 §8, implicit expiry)."""
    cur = await conn.execute(
        f"""{_DUE} JOIN tenants n ON n.id = m.tenant_id
             WHERE m.tenant_id = %s AND m.status = ANY(%s::message_status_t[])
               AND (m.expires_at < now() OR (m.expires_at IS NULL AND m.accepted_at
                    < now() - make_interval(days => GREATEST(n.retention_days - 1, 1))))
             ORDER BY m.accepted_at LIMIT %s""",
        (tenant_id, ["accepted", "fetched"], limit),
    )
    return await cur.fetchall()


async def due_dead_letters(
    conn: Conn, tenant_id: uuid.UUID, *, max_deliver: int, idle_s: int, limit: int
) -> list[Row]:
    """The sweeper's backstop (05 §7.1): still ``fetched`` after MaxDeliver attempts, with no
    transport ack and no fetch for ``idle_s`` seconds."""
    cur = await conn.execute(
        f"""{_DUE} JOIN delivery_state d ON d.msg_id = m.id AND d.agent_id = m.to_agent_id
             WHERE m.tenant_id = %s AND d.tenant_id = %s AND m.status = 'fetched'
               AND d.attempt >= %s AND d.transport_acked_at IS NULL
               AND d.last_fetched_at < now() - %s * interval '1 second'
             ORDER BY m.accepted_at LIMIT %s""",
        (tenant_id, tenant_id, max_deliver, idle_s, limit),
    )
    return await cur.fetchall()
