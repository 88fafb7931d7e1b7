"""messages (delivery columns) and delivery_state: SQL only, on a connection inside the tenant's
scope. Every status change names the statuses it may start from (``domain.sources``), so racing
handlers can never move a message backwards; callers learn from the row count who won.

Lookups by id are bounded below by the id's time minus 5 minutes (``accepted_at >= id time -
5 min``, conventions §1.3), which prunes partitions through ``messages_id_uq``.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from platformkit.db.scope import Conn

from agentbus.delivery.domain import Status, sources
from agentbus.gateway.wire import uuid7_time

Row = dict[str, Any]
ID_SLACK = timedelta(minutes=5)

_COPY = """SELECT m.id, m.tenant_id, m.accepted_at, m.type, m.status::text AS status, m.expires_at,
        m.stream_seq, m.attempts, m.to_agent_id, m.payload_ref, m.payload_sha256, m.dek_version,
        m.signing_key_id, m.from_agent_id, m.capability, m.conversation_id, m.workspace_id,
        d.attempt, d.transport_acked_at,
        d.application_acked_at, d.dlq_reason
    FROM messages m
    LEFT JOIN delivery_state d ON d.msg_id = m.id AND d.agent_id = %(agent)s
   WHERE m.tenant_id = %(t)s AND m.id = ANY(%(ids)s) AND m.accepted_at >= %(since)s"""


def _since(ids: Sequence[uuid.UUID]) -> datetime:
    return min(uuid7_time(i) for i in ids) - ID_SLACK


async def load(
    conn: Conn, tenant_id: uuid.UUID, agent_id: uuid.UUID, ids: Sequence[uuid.UUID]
) -> dict[uuid.UUID, Row]:
    """Messages to ``agent_id`` by id, with that agent's delivery_state columns."""
    if not ids:
        return {}
    cur = await conn.execute(
        _COPY + " AND m.to_agent_id = %(agent)s",
        {"t": tenant_id, "agent": agent_id, "ids": list(ids), "since": _since(ids)},
    )
    return {row["id"]: row for row in await cur.fetchall()}


async def lock(
    conn: Conn, tenant_id: uuid.UUID, agent_id: uuid.UUID, msg_id: uuid.UUID
) -> Row | None:
    """One message to ``agent_id``, row-locked for a status change."""
    cur = await conn.execute(
        _COPY + " AND m.to_agent_id = %(agent)s FOR UPDATE OF m",
        {"t": tenant_id, "agent": agent_id, "ids": [msg_id], "since": _since([msg_id])},
    )
    return await cur.fetchone()


async def lock_many(
    conn: Conn, tenant_id: uuid.UUID, agent_id: uuid.UUID, ids: Sequence[uuid.UUID]
) -> dict[uuid.UUID, Row]:
    """``lock`` for several distinct messages in one statement, locked in id order (so two
    batches never deadlock); each id keeps its own lower bound on ``accepted_at``."""
    if not ids:
        return {}
    cur = await conn.execute(
        _COPY + " AND m.to_agent_id = %(agent)s ORDER BY m.id FOR UPDATE OF m",
        {"t": tenant_id, "agent": agent_id, "ids": list(ids), "since": _since(ids)},
    )
    return {
        row["id"]: row
        for row in await cur.fetchall()
        if row["accepted_at"] >= uuid7_time(row["id"]) - ID_SLACK
    }


async def lock_any(
    conn: Conn, tenant_id: uuid.UUID, msg_id: uuid.UUID, accepted_at: datetime
) -> Row | None:
    """One message found by a controller (whoever it is to), by its full key, row-locked."""
    query = _COPY.replace("d.agent_id = %(agent)s", "d.agent_id = m.to_agent_id").replace(
        "m.accepted_at >= %(since)s", "m.accepted_at = %(since)s"
    )
    cur = await conn.execute(
        query + " FOR UPDATE OF m", {"t": tenant_id, "ids": [msg_id], "since": accepted_at}
    )
    return await cur.fetchone()


async def mark_fetched(
    conn: Conn, tenant_id: uuid.UUID, agent_id: uuid.UUID, copies: Sequence[Row]
) -> set[uuid.UUID]:
    """One statement for a whole pull: ``fetched``, attempts = JetStream's delivery count,
    ``stream_seq`` if still NULL; delivery_state attempt, ``last_fetched_at``,
    ``nak_until = NULL``. ``copies`` carry id, accepted_at, attempt and stream_seq; returns the
    ids whose status moved (the rest changed status meanwhile)."""
    if not copies:
        return set()
    cur = await conn.execute(
        """WITH u AS (
                SELECT * FROM unnest(%(ids)s::uuid[], %(ats)s::timestamptz[], %(attempts)s::int[],
                                     %(seqs)s::bigint[]) AS u(id, at, attempt, seq)),
            state AS (
                INSERT INTO delivery_state AS d (tenant_id, msg_id, agent_id, attempt,
                                                 last_fetched_at)
                SELECT %(t)s, u.id, %(agent)s, u.attempt, now() FROM u
                ON CONFLICT (msg_id, agent_id) DO UPDATE
                   SET attempt = GREATEST(d.attempt, excluded.attempt),
                       last_fetched_at = now(), nak_until = NULL)
           UPDATE messages m
              SET status = 'fetched', attempts = GREATEST(m.attempts, u.attempt),
                  stream_seq = COALESCE(m.stream_seq, u.seq)
             FROM u
            WHERE m.tenant_id = %(t)s AND m.id = u.id AND m.accepted_at = u.at
              AND m.status = ANY(%(from)s::message_status_t[])
        RETURNING m.id""",
        {"ids": [c["id"] for c in copies], "ats": [c["accepted_at"] for c in copies],
         "attempts": [c["attempt"] for c in copies], "seqs": [c["stream_seq"] for c in copies],
         "t": tenant_id, "agent": agent_id, "from": sources(Status.FETCHED)},
    )  # fmt: skip
    return {row["id"] for row in await cur.fetchall()}


async def move(conn: Conn, tenant_id: uuid.UUID, row: Row, to: Status) -> bool:
    """``row``'s message to ``to`` (expired, dead-lettered, discarded) if its status still
    allows it. Acks, which also fill ``delivered_at`` and ``read_at``, use ``ack_many``."""
    cur = await conn.execute(
        """UPDATE messages SET status = %(to)s
             WHERE tenant_id = %(t)s AND id = %(id)s AND accepted_at = %(at)s
               AND status = ANY(%(from)s::message_status_t[])
         RETURNING id""",
        {"to": to.value, "t": tenant_id, "id": row["id"], "at": row["accepted_at"],
         "from": sources(to)},
    )  # fmt: skip
    return await cur.fetchone() is not None  # fetched, not rowcount: pipeline-safe


_ACKED = {
    Status.DELIVERED: ("", "", ""),
    Status.READ: (
        ", read_at = COALESCE(u.read_at, now())",
        ", application_acked_at",
        ", application_acked_at = COALESCE(d.application_acked_at, excluded.application_acked_at)",
    ),
}


async def ack_many(
    conn: Conn,
    tenant_id: uuid.UUID,
    agent_id: uuid.UUID,
    rows: Sequence[Row],
    to: Status,
    read_ats: Sequence[datetime | None],
) -> set[uuid.UUID]:
    """A whole batch to ``delivered`` (transport ack) or ``read`` (application ack,
    ``read_ats`` per row), filling ``delivered_at`` (a read proves delivery, 05 §2.1) and
    ``read_at``, and each moved message's ``delivery_state`` (transport ack; for ``read`` also
    the application ack), in one statement. Returns the ids that moved; the others changed
    status meanwhile."""
    read_set, app_column, app_set = _ACKED[to]
    app_value = ", COALESCE(moved.read_at, now())" if app_column else ""
    cur = await conn.execute(
        f"""WITH moved AS (
                UPDATE messages m SET status = %(to)s,
                       delivered_at = COALESCE(m.delivered_at, now()){read_set}
                  FROM unnest(%(ids)s::uuid[], %(ats)s::timestamptz[], %(reads)s::timestamptz[])
                       AS u(id, at, read_at)
                 WHERE m.tenant_id = %(t)s AND m.id = u.id AND m.accepted_at = u.at
                   AND m.status = ANY(%(from)s::message_status_t[])
             RETURNING m.id, u.read_at)
            INSERT INTO delivery_state AS d (tenant_id, msg_id, agent_id, transport_acked_at
                                             {app_column})
            SELECT %(t)s, moved.id, %(agent)s, now(){app_value} FROM moved
            ON CONFLICT (msg_id, agent_id) DO UPDATE
               SET transport_acked_at = COALESCE(d.transport_acked_at, now()){app_set}
            RETURNING d.msg_id""",
        {"to": to.value, "t": tenant_id, "agent": agent_id, "from": sources(to),
         "ids": [r["id"] for r in rows], "ats": [r["accepted_at"] for r in rows],
         "reads": list(read_ats)},
    )  # fmt: skip
    return {row["msg_id"] for row in await cur.fetchall()}


_STATE_SET = {
    "nak": "nak_until = now() + %(delay_ms)s * interval '1 millisecond'",
    "dead_letter": "dlq_reason = %(reason)s",
}


async def record(
    conn: Conn,
    tenant_id: uuid.UUID,
    msg_id: uuid.UUID,
    agent_id: uuid.UUID,
    fact: str,
    **params: Any,
) -> None:
    """Write one delivery fact (``nak`` with ``delay_ms``, ``dead_letter`` with ``reason``)
    into the agent's delivery_state row, creating the row if the message was never fetched.
    Acks are written by ``ack_many``."""
    keys = {"t": tenant_id, "msg": msg_id, "agent": agent_id}
    async with conn.pipeline():  # two statements, one round trip
        await conn.execute(
            """INSERT INTO delivery_state (tenant_id, msg_id, agent_id)
               VALUES (%(t)s, %(msg)s, %(agent)s) ON CONFLICT (msg_id, agent_id) DO NOTHING""",
            keys,
        )
        await conn.execute(
            f"""UPDATE delivery_state AS d SET {_STATE_SET[fact]}
                 WHERE d.tenant_id = %(t)s AND d.msg_id = %(msg)s AND d.agent_id = %(agent)s""",
            keys | params,
        )
