"""messages (delivery columns) and delivery_state: SQL only, on a connection inside the tenant's
scope. Every status change names the statuses it may start from (``domain.sources``), so racing
handlers can never move a message backwards; callers learn from the ids returned who won.

Lookups by id are bounded below by the id's time minus 5 minutes (``accepted_at >= id time -
5 min``, conventions §1.3), and those that lock nothing also above, by a day after the
transaction's start (``messages.ACCEPTED_BEFORE``), which prunes partitions through
``messages_id_uq``. Statements for a batch reach messages one id at a time by index (a lateral
lookup per id; writes then by TID), so their cost follows the batch and not the table, with or
without the planner's statistics.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from platformkit.db.scope import Conn

from agentbus.delivery.domain import Status, sources
from agentbus.gateway.domain.wire import accepted_since
from agentbus.gateway.store.messages import ACCEPTED_BEFORE

Row = dict[str, Any]

_COLUMNS = """m.id, m.tenant_id, m.accepted_at, m.type, m.status::text AS status, m.expires_at,
        m.stream_seq, m.attempts, m.to_agent_id, m.payload_ref, m.payload_sha256, m.dek_version,
        m.signing_key_id, m.from_agent_id, m.capability, m.conversation_id, m.workspace_id,
        m.payload_bytes, m.priority,
        d.attempt, d.transport_acked_at, d.application_acked_at, d.dlq_reason"""

# One index probe per id, in the order of the ids, and one into delivery_state's key: the
# subqueries (kept apart by OFFSET 0) run for each id, so the plan cannot turn into a scan of
# the tenant's recent rows or of delivery_state. Arrays travel in binary (``%(...)b``): psycopg
# builds a text array in Python element by element (1.8 µs per uuid, 3.3 per timestamp here),
# a binary one for a fraction of that.
#
# Only the plain lookup carries the upper bound: PostgreSQL 18.6 crashed (a segmentation fault
# of the backend, and with it a restart of the whole server) running a row-locking lateral
# lookup with that bound inside ``record_receipts``, under the two-worker benchmark, where such
# a lock waits for rows another transaction is changing. Statements that lock rows stay
# bounded below only.
_BY_IDS = f"""SELECT {_COLUMNS}
    FROM unnest(%(ids)b::uuid[], %(since)b::timestamptz[], %(agents)b::uuid[])
         AS k(id, since, agent)
    CROSS JOIN LATERAL (
        SELECT * FROM messages m0
         WHERE m0.tenant_id = %(t)s AND m0.id = k.id AND m0.accepted_at >= k.since
           AND m0.to_agent_id = k.agent{{before}}
        OFFSET 0{{lock}}) AS m
    LEFT JOIN LATERAL (
        SELECT * FROM delivery_state d0 WHERE d0.msg_id = m.id AND d0.agent_id = k.agent
        OFFSET 0) AS d ON true"""
_BEFORE = f" AND m0.accepted_at < {ACCEPTED_BEFORE}"


# Batch updates reach each row through its full key: the rows are locked first, one index probe
# per row (``_LOCK``, or the caller's ``lock_many``), in a statement of their own; then the
# UPDATE writes them by TID only, the TIDs those of ``message_tids()`` (migration 0010), which
# finds each row again the same way and keeps those whose status is one of %(from)s. The UPDATE
# runs with index and bitmap scans off (``_TID_ONLY`` before it, ``_SCANS_BACK`` after it), so
# the target is read through ``ctid = ANY(...)`` and never by a scan of the tenant's rows,
# whatever the planner guesses of the tenant's share. A pipelined transaction sends them all
# together.
#
# Joined to messages directly, the id array left the plan to the statistics: without fresh ones
# PostgreSQL scanned the tenant's rows, and with them the whole partial index of open statuses,
# whose dead entries grow until the next vacuum. The lock must come before the UPDATE's
# statement: a statement sees the rows as of its start, so an UPDATE that waited for a lock
# inside itself would look for the row's old version by TID and miss the one a concurrent
# transaction had just committed (the send path writing stream_seq as the pull arrives). After
# the lock, the UPDATE's snapshot holds the latest version, and nobody else can change it.
_LOCK = """SELECT 1
      FROM unnest(%(ids)b::uuid[], %(ats)b::timestamptz[]) AS u(id, at)
      CROSS JOIN LATERAL (
          SELECT 1 FROM messages m0
           WHERE m0.tenant_id = %(t)s AND m0.id = u.id AND m0.accepted_at = u.at
          OFFSET 0 FOR UPDATE) AS x"""
_TID_ONLY = """SELECT set_config('enable_indexscan', 'off', true),
                      set_config('enable_bitmapscan', 'off', true)"""
# Back to the session's values (the pool's connections never set them otherwise). Not through
# pg_settings: that view renders every setting as text on each read, 0.1 ms of the server's CPU.
_SCANS_BACK = ("RESET enable_indexscan", "RESET enable_bitmapscan")
# The rows to write: ``u`` holds their keys (id, at); the scalar subquery runs once.
_BY_TID = """m.ctid = ANY ((SELECT message_tids(%(t)s, %(ids)b::uuid[], %(ats)b::timestamptz[],
                                              %(from)s::message_status_t[]))::tid[])
             AND m.tenant_id = %(t)s AND m.id = u.id AND m.accepted_at = u.at"""


async def _write_by_tid(conn: Conn, query: str, params: dict[str, Any]) -> list[Row]:
    """``query`` (an UPDATE of messages through ``_BY_TID``) with index scans off; its rows."""
    await conn.execute(_TID_ONLY)
    cur = await conn.execute(query, params)
    for statement in _SCANS_BACK:
        await conn.execute(statement)
    return await cur.fetchall()


def _by_ids(tenant_id: uuid.UUID, to: Mapping[uuid.UUID, uuid.UUID]) -> dict[str, Any]:
    """Parameters of ``_BY_IDS``: ``to`` maps each id to the agent its message must be to."""
    ids = list(to)
    since = [accepted_since(i) for i in ids]
    return {"t": tenant_id, "ids": ids, "since": since, "agents": list(to.values())}


async def load(
    conn: Conn, tenant_id: uuid.UUID, to: Mapping[uuid.UUID, uuid.UUID]
) -> dict[uuid.UUID, Row]:
    """Messages by id, each to the agent ``to`` maps it to, with that agent's delivery_state
    columns."""
    if not to:
        return {}
    cur = await conn.execute(_BY_IDS.format(lock="", before=_BEFORE), _by_ids(tenant_id, to))
    return {row["id"]: row for row in await cur.fetchall()}


async def delivery_state(conn: Conn, msg_id: uuid.UUID, agent_id: uuid.UUID) -> Row | None:
    """The recipient's delivery_state row of a message, if it was ever handed out."""
    cur = await conn.execute(
        """SELECT attempt, last_fetched_at, transport_acked_at, application_acked_at, nak_until,
                  dlq_reason
             FROM delivery_state WHERE msg_id = %s AND agent_id = %s""",
        (msg_id, agent_id),
    )
    return await cur.fetchone()


async def lock(
    conn: Conn, tenant_id: uuid.UUID, agent_id: uuid.UUID, msg_id: uuid.UUID
) -> Row | None:
    """One message to ``agent_id``, row-locked for a status change."""
    return (await lock_many(conn, tenant_id, {msg_id: agent_id})).get(msg_id)


async def lock_many(
    conn: Conn, tenant_id: uuid.UUID, to: Mapping[uuid.UUID, uuid.UUID]
) -> dict[uuid.UUID, Row]:
    """``lock`` for several distinct messages in one statement, each to the agent ``to`` maps
    it to (the agents of a group commit may differ), locked in id order (so two batches never
    deadlock); each id keeps its own lower bound on ``accepted_at``."""
    if not to:
        return {}
    in_order = {i: to[i] for i in sorted(to)}
    cur = await conn.execute(
        _BY_IDS.format(lock=" FOR UPDATE", before=""), _by_ids(tenant_id, in_order)
    )
    return {row["id"]: row for row in await cur.fetchall()}


async def lock_any(
    conn: Conn, tenant_id: uuid.UUID, msg_id: uuid.UUID, accepted_at: datetime
) -> Row | None:
    """One message found by a controller (whoever it is to), by its full key, row-locked."""
    cur = await conn.execute(
        f"""SELECT {_COLUMNS}
              FROM messages m
              LEFT JOIN delivery_state d ON d.msg_id = m.id AND d.agent_id = m.to_agent_id
             WHERE m.tenant_id = %(t)s AND m.id = %(id)s AND m.accepted_at = %(at)s
               FOR UPDATE OF m""",
        {"t": tenant_id, "id": msg_id, "at": accepted_at},
    )
    return await cur.fetchone()


async def mark_fetched(conn: Conn, tenant_id: uuid.UUID, copies: Sequence[Row]) -> set[uuid.UUID]:
    """One round trip for a whole pull, or a round of pulls of several agents (the lock, then
    one statement): ``fetched``, attempts = JetStream's delivery count, ``stream_seq`` if still
    NULL; the recipient's (``to_agent_id``) delivery_state attempt, ``last_fetched_at``,
    ``nak_until = NULL``. ``copies`` carry id, accepted_at, to_agent_id, attempt and
    stream_seq, each id once; returns the ids whose status moved (the rest changed status
    meanwhile). The rows are locked in id order, as by ``lock_many`` and ``record_receipts``,
    so rounds of different processes never wait on each other in a cycle."""
    if not copies:
        return set()
    copies = sorted(copies, key=lambda c: c["id"])
    params = {
        "ids": [c["id"] for c in copies], "ats": [c["accepted_at"] for c in copies],
        "attempts": [c["attempt"] for c in copies], "seqs": [c["stream_seq"] for c in copies],
        "agents": [c["to_agent_id"] for c in copies], "t": tenant_id,
        "from": sources(Status.FETCHED),
    }  # fmt: skip
    await conn.execute(_LOCK, params)
    rows = await _write_by_tid(
        conn,
        f"""WITH u AS (
                SELECT * FROM unnest(%(ids)b::uuid[], %(ats)b::timestamptz[], %(attempts)b::int[],
                                     %(seqs)b::bigint[], %(agents)b::uuid[])
                           AS u(id, at, attempt, seq, agent)),
            state AS (
                INSERT INTO delivery_state AS d (tenant_id, msg_id, agent_id, attempt,
                                                 last_fetched_at)
                SELECT %(t)s, u.id, u.agent, u.attempt, now() FROM u
                ON CONFLICT (msg_id, agent_id) DO UPDATE
                   SET attempt = GREATEST(d.attempt, excluded.attempt),
                       last_fetched_at = now(), nak_until = NULL)
           UPDATE messages m
              SET status = 'fetched', attempts = GREATEST(m.attempts, u.attempt),
                  stream_seq = COALESCE(m.stream_seq, u.seq)
             FROM u
            WHERE {_BY_TID}
        RETURNING m.id""",
        params,
    )
    return {row["id"] for row in rows}


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


async def redriven(conn: Conn, tenant_id: uuid.UUID, row: Row, seq: int) -> bool:
    """``dead_lettered -> accepted`` with the sequence of the redrive's copy."""
    cur = await conn.execute(
        """UPDATE messages SET status = 'accepted', stream_seq = %(seq)s
             WHERE tenant_id = %(t)s AND id = %(id)s AND accepted_at = %(at)s
               AND status = ANY(%(from)s::message_status_t[])
         RETURNING id""",
        {"seq": seq, "t": tenant_id, "id": row["id"], "at": row["accepted_at"],
         "from": sources(Status.ACCEPTED)},
    )  # fmt: skip
    return await cur.fetchone() is not None


async def discard_waiting(conn: Conn, tenant_id: uuid.UUID, agent_id: uuid.UUID) -> list[Row]:
    """Every message still waiting for ``agent_id`` (``accepted``, ``fetched``) to
    ``discarded``, in one statement (the ``to_agent_id, status`` index); the rows that moved."""
    cur = await conn.execute(
        """UPDATE messages SET status = 'discarded'
            WHERE tenant_id = %s AND to_agent_id = %s AND status IN ('accepted', 'fetched')
        RETURNING id, tenant_id, type, from_agent_id, attempts""",
        (tenant_id, agent_id),
    )
    return await cur.fetchall()


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
    rows: Sequence[Row],
    to: Status,
    read_ats: Sequence[datetime | None],
) -> set[uuid.UUID]:
    """A whole batch to ``delivered`` (transport ack) or ``read`` (application ack,
    ``read_ats`` per row), filling ``delivered_at`` (a read proves delivery, 05 §2.1) and
    ``read_at``, and each moved message's ``delivery_state`` (transport ack; for ``read`` also
    the application ack), in one statement. ``rows`` were locked by the caller (``lock_many``,
    an earlier statement of this transaction), so the update by TID writes their latest
    version; each row's ``delivery_state`` is its recipient's (``to_agent_id``), so one
    statement serves the rows of several agents. Returns the ids that moved; the others changed
    status meanwhile."""
    read_set, app_column, app_set = _ACKED[to]
    app_value = ", COALESCE(moved.read_at, now())" if app_column else ""
    keys = """unnest(%(ids)b::uuid[], %(ats)b::timestamptz[], %(reads)b::timestamptz[],
                      %(agents)b::uuid[])"""
    params = {
        "to": to.value, "t": tenant_id, "from": sources(to),
        "ids": [r["id"] for r in rows], "ats": [r["accepted_at"] for r in rows],
        "reads": list(read_ats), "agents": [r["to_agent_id"] for r in rows],
    }  # fmt: skip
    moved = await _write_by_tid(
        conn,
        f"""WITH u AS (SELECT * FROM {keys} AS u(id, at, read_at, agent)),
            moved AS (
                UPDATE messages m SET status = %(to)s,
                       delivered_at = COALESCE(m.delivered_at, now()){read_set}
                  FROM u
                 WHERE {_BY_TID}
             RETURNING m.id, u.read_at, u.agent)
            INSERT INTO delivery_state AS d (tenant_id, msg_id, agent_id, transport_acked_at
                                             {app_column})
            SELECT %(t)s, moved.id, moved.agent, now(){app_value} FROM moved
            ON CONFLICT (msg_id, agent_id) DO UPDATE
               SET transport_acked_at = COALESCE(d.transport_acked_at, now()){app_set}
            RETURNING d.msg_id""",
        params,
    )
    return {row["msg_id"] for row in moved}


_STATE_SET = {
    "nak": "nak_until = now() + %(delay_ms)s * interval '1 millisecond'",
    "dead_letter": "dlq_reason = %(reason)s",
    # a redrive's new copy starts counting again: attempt is what MaxDeliver counts
    "redrive": "attempt = 0, last_fetched_at = NULL, nak_until = NULL, dlq_reason = NULL",
}


async def record(
    conn: Conn,
    tenant_id: uuid.UUID,
    msg_id: uuid.UUID,
    agent_id: uuid.UUID,
    fact: str,
    **params: Any,
) -> None:
    """Write one delivery fact (``nak`` with ``delay_ms``, ``dead_letter`` with ``reason``,
    ``redrive``) into the agent's delivery_state row, creating the row if the message was never
    fetched. Acks are written by ``ack_many``."""
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
