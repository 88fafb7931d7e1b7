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
    """One statement per table for a whole pull: ``fetched``, attempts = JetStream's delivery
    count, ``stream_seq`` if still NULL; delivery_state attempt, ``last_fetched_at``,
    ``nak_until = NULL``. ``copies`` carry id, accepted_at, attempt and stream_seq; returns the
    ids whose status moved (the rest changed status meanwhile)."""
    if not copies:
        return set()
    ids = [c["id"] for c in copies]
    attempts = [c["attempt"] for c in copies]
    cur = await conn.execute(
        """UPDATE messages m
              SET status = 'fetched', attempts = GREATEST(m.attempts, u.attempt),
                  stream_seq = COALESCE(m.stream_seq, u.seq)
             FROM unnest(%s::uuid[], %s::timestamptz[], %s::int[], %s::bigint[])
                  AS u(id, at, attempt, seq)
            WHERE m.tenant_id = %s AND m.id = u.id AND m.accepted_at = u.at
              AND m.status = ANY(%s::message_status_t[])
        RETURNING m.id""",
        (ids, [c["accepted_at"] for c in copies], attempts, [c["stream_seq"] for c in copies],
         tenant_id, sources(Status.FETCHED)),
    )  # fmt: skip
    moved = {row["id"] for row in await cur.fetchall()}
    await conn.execute(
        """INSERT INTO delivery_state AS d (tenant_id, msg_id, agent_id, attempt, last_fetched_at)
           SELECT %s, u.id, %s, u.attempt, now()
             FROM unnest(%s::uuid[], %s::int[]) AS u(id, attempt)
           ON CONFLICT (msg_id, agent_id) DO UPDATE
              SET attempt = GREATEST(d.attempt, excluded.attempt),
                  last_fetched_at = now(), nak_until = NULL""",
        (tenant_id, agent_id, ids, attempts),
    )
    return moved


async def move(
    conn: Conn, tenant_id: uuid.UUID, row: Row, to: Status, *, read_at: datetime | None = None
) -> bool:
    """``row``'s message to ``to`` if its status still allows it; ``delivered`` and ``read`` fill
    ``delivered_at`` (a read proves delivery, 05 §2.1), ``read`` also ``read_at``."""
    extra = ""
    if to in (Status.DELIVERED, Status.READ):
        extra = ", delivered_at = COALESCE(delivered_at, now())"
    if to is Status.READ:
        extra += ", read_at = COALESCE(%(read_at)s, now())"
    cur = await conn.execute(
        f"""UPDATE messages SET status = %(to)s{extra}
             WHERE tenant_id = %(t)s AND id = %(id)s AND accepted_at = %(at)s
               AND status = ANY(%(from)s::message_status_t[])""",
        {"to": to.value, "t": tenant_id, "id": row["id"], "at": row["accepted_at"],
         "from": sources(to), "read_at": read_at},
    )  # fmt: skip
    return cur.rowcount == 1


_STATE_SET = {
    "transport_ack": "transport_acked_at = COALESCE(d.transport_acked_at, now())",
    "read": "transport_acked_at = COALESCE(d.transport_acked_at, now()),"
    " application_acked_at = COALESCE(d.application_acked_at, %(at)s, now())",
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
    """Write one delivery fact (``transport_ack``, ``read`` with ``at``, ``nak`` with
    ``delay_ms``, ``dead_letter`` with ``reason``) into the agent's delivery_state row,
    creating the row if the message was never fetched."""
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


async def sender_keys(
    conn: Conn, tenant_id: uuid.UUID, key_ids: Sequence[uuid.UUID]
) -> dict[uuid.UUID, Row]:
    """The signing keys of delivered envelopes, so the sidecar can verify them (04 §5.1)."""
    if not key_ids:
        return {}
    cur = await conn.execute(
        """SELECT id, public_key, expires_at FROM agent_keys
            WHERE tenant_id = %s AND id = ANY(%s)""",
        (tenant_id, list(set(key_ids))),
    )
    return {row["id"]: row for row in await cur.fetchall()}
