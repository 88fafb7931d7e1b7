"""Message events for ClickHouse, read from PostgreSQL's ``events`` (migration 0024): the pass's
mark and the oldest running transaction (``horizon``), the tenants with events to send, a
tenant's next events in the order they were written, and its cursor. Every read of a tenant's
rows runs in its scope (RLS); only the tenant list crosses tenants, through a lookup function.

``latency_ms`` is as decision 0050 defines it: for ``message.accepted`` the time since the
sender created the message (the id's time), for ``message.read`` since its transport ack (or its
acceptance), for ``message.redriven`` none, and for every other step since its acceptance, so
that the model's ``mv_delivery_latency_hourly`` reads ``message.delivered`` as accept-to-deliver.
The earlier steps come from the message's own events, by the table's key."""

from __future__ import annotations

import uuid
from typing import Any

from platformkit.db.scope import Conn
from psycopg.types.string import TextLoader

from agentbus.analytics.horizon import Mark, widen

Row = dict[str, Any]
NIL = uuid.UUID(int=0)  # before every event
NEVER = uuid.UUID(int=(1 << 128) - 1)  # after every event


async def mark(conn: Conn) -> tuple[Mark, int]:
    """This pass's mark, and the oldest transaction id still running in this database (the
    mark's own number when none runs). The time is read by a statement of its own, before the
    snapshot that gives the next id; the running ones are read in that statement, after its
    snapshot was taken."""
    at = await (await conn.execute("SELECT clock_timestamp() AS at")).fetchone()
    ids = await (
        await conn.execute(
            """SELECT pg_snapshot_xmax(pg_current_snapshot())::text::bigint AS next_xid,
                      ARRAY(SELECT l.transactionid::text::bigint
                              FROM pg_locks l LEFT JOIN pg_stat_activity a ON a.pid = l.pid
                             WHERE l.locktype = 'transactionid' AND l.mode = 'ExclusiveLock'
                               AND l.granted
                               AND (a.datname = current_database() OR l.pid IS NULL)) AS held"""
        )
    ).fetchone()
    assert at is not None
    assert ids is not None
    noted = Mark(at["at"], int(ids["next_xid"]))
    held = [widen(int(xid), noted.next_xid) for xid in ids["held"]]
    return noted, min([noted.next_xid, *held])


async def tenants_with_events(conn: Conn, before: uuid.UUID) -> list[Row]:
    """(tenant_id, after): tenants with events after their cursor and below ``before``."""
    cur = await conn.execute("SELECT tenant_id, after FROM analytics_event_tenants(%s)", (before,))
    return list(await cur.fetchall())


async def take(
    conn: Conn, tenant_id: uuid.UUID, after: uuid.UUID, before: uuid.UUID, limit: int
) -> list[Row]:
    """The tenant's next events after ``after`` and below ``before``, oldest first, as
    ClickHouse rows (``event_time`` in its text form, ``attempt`` and ``payload_bytes`` within
    its column types, ids and ``details`` as PostgreSQL's text)."""
    async with conn.cursor() as cur:
        for name in ("uuid", "jsonb"):  # as text: ClickHouse takes them as text, parsing is waste
            cur.adapters.register_loader(name, TextLoader)
        await cur.execute(
            """SELECT e.event_id, analytics_ts(e.event_time) AS event_time, e.event, e.tenant_id,
                  e.workspace_id, e.message_id, e.conversation_id, e.task_id, e.trace_id,
                  e.span_id, e.from_agent_id, e.to_agent_id, e.type, e.capability,
                  LEAST(GREATEST(e.attempt, 0), 255) AS attempt, e.actor,
                  LEAST(GREATEST(e.payload_bytes, 0), 4294967295) AS payload_bytes,
                  CASE e.event
                      WHEN 'message.accepted'
                          THEN analytics_ms(analytics_uuid_time(e.message_id), e.event_time)
                      WHEN 'message.read'
                          THEN analytics_ms(COALESCE(p.delivered_at, p.accepted_at), e.event_time)
                      WHEN 'message.redriven' THEN NULL
                      ELSE analytics_ms(p.accepted_at, e.event_time)
                  END AS latency_ms,
                  e.error_code, e.policy_id, e.bridged_from, e.details
             FROM events e
             LEFT JOIN LATERAL (
                 SELECT min(p0.event_time) FILTER (WHERE p0.event = 'message.accepted')
                            AS accepted_at,
                        max(p0.event_time) FILTER (WHERE p0.event = 'message.delivered')
                            AS delivered_at
                   FROM events p0
                  WHERE p0.tenant_id = e.tenant_id AND p0.message_id = e.message_id
                    AND p0.event_id < e.event_id) AS p ON true
            WHERE e.tenant_id = %(t)s AND e.event_id > %(after)s AND e.event_id < %(before)s
            ORDER BY e.event_id LIMIT %(n)s""",
            {"t": tenant_id, "after": after, "before": before, "n": limit},
        )
        return list(await cur.fetchall())


async def save_cursor(conn: Conn, tenant_id: uuid.UUID, event_id: uuid.UUID) -> None:
    await conn.execute(
        """INSERT INTO analytics_event_cursors (tenant_id, event_id) VALUES (%s, %s)
           ON CONFLICT (tenant_id)
           DO UPDATE SET event_id = EXCLUDED.event_id, updated_at = now()""",
        (tenant_id, event_id),
    )
