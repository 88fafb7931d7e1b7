"""messages (data model §1.6): envelope metadata; the payload is an encrypted object.

Reads join the sender's address (``from_address``) and the recipient's inbox subject
(``to_subject``) because every envelope attribute must be
rebuildable from the row (conventions §3.1). Lookups by id are bounded below by the id's own
time minus 5 minutes, which lets PostgreSQL prune partitions through ``messages_id_uq``.
"""

from __future__ import annotations

import hashlib
import uuid
from datetime import datetime, timedelta
from typing import Any

from platformkit import fastjson
from platformkit.db.scope import Conn
from psycopg.types.json import Jsonb

from agentbus.gateway.domain.wire import accepted_since

Row = dict[str, Any]

_COLUMNS = "m.*, a.address AS from_address, r.inbox_subject AS to_subject"
_ADDRESSES = """JOIN agents a ON a.tenant_id = m.tenant_id AND a.id = m.from_agent_id
    LEFT JOIN agents r ON r.tenant_id = m.tenant_id AND r.id = m.to_agent_id"""
SELECT = f"SELECT {_COLUMNS} FROM messages m {_ADDRESSES}"
# The upper bound of a lookup by id, beside the id's lower one (``accepted_since``): no row was
# accepted later than a day after the looking transaction began (a day is far longer than any
# transaction lives), and ``now()`` is fixed for the statement, so PostgreSQL drops the
# partitions created ahead (three months of them, all empty) when the statement starts instead
# of probing each of them once per id. Only for statements that lock no rows (delivery/store.py
# says why).
ACCEPTED_BEFORE = "now() + interval '1 day'"
# Several ids: one index probe per id (the subquery, kept apart by OFFSET 0, runs for each),
# so the plan cannot become a scan of the tenant's recent rows whatever the statistics say.
# The arrays travel in binary (``%b``, as in delivery/store.py).
_BY_IDS = f"""SELECT {_COLUMNS}
    FROM unnest(%b::uuid[], %b::timestamptz[]) AS k(id, since)
    CROSS JOIN LATERAL (
        SELECT * FROM messages m0
         WHERE m0.tenant_id = %s AND m0.id = k.id AND m0.accepted_at >= k.since
           AND m0.accepted_at < {ACCEPTED_BEFORE}
        OFFSET 0) AS m
    {_ADDRESSES}"""


async def insert_messages(conn: Conn, tenant_id: uuid.UUID, rows: list[Row]) -> None:
    """Insert the rows (each with the same columns, ``accepted_at`` among them: the
    transaction's time, from ``claim_ids``) in one statement that takes them as one JSON
    document, so a batch costs one statement and nothing comes back: in a pipelined
    transaction the insert travels with the COMMIT. A failure surfaces at the next fetch or at
    the end of the transaction.

    The rows go in conversation order: the statistics trigger updates each row's conversation
    at commit, in insert order, and a transaction shared by several agents' sends may touch
    conversations another one touches too, so both take the conversation rows' locks in the
    same order and never wait on each other in a cycle."""
    if not rows:
        return
    rows = sorted(rows, key=lambda r: (r["conversation_id"], r["id"]))
    names = list(rows[0])
    document = [{n: _json_value(v) for n, v in row.items()} for row in rows]
    await conn.execute(
        f"""INSERT INTO messages (tenant_id, {", ".join(names)})
            SELECT %s, {", ".join(f"r.{n}" for n in names)}
              FROM jsonb_populate_recordset(NULL::messages, %s::jsonb) AS r""",
        [tenant_id, Jsonb(document, fastjson.dumps)],
    )


def _json_value(value: Any) -> Any:
    """bytea travels as its hex text form, which the column's input reads back."""
    return "\\x" + value.hex() if isinstance(value, bytes) else value


def id_lock_key(tenant_id: uuid.UUID, msg_id: uuid.UUID) -> int:
    """The advisory lock key of one message id: a keyed digest, so a client choosing ids cannot
    aim at another lock of the database (signed 64 bits, the one-bigint key space)."""
    digest = hashlib.blake2b(msg_id.bytes, digest_size=8, key=tenant_id.bytes).digest()
    return int.from_bytes(digest, "big", signed=True)


async def claim_ids(
    conn: Conn, tenant_id: uuid.UUID, msg_ids: list[uuid.UUID]
) -> tuple[dict[uuid.UUID, Row], datetime]:
    """``find_message`` for the ids of a send, after locking each id until the end of the
    transaction; and the transaction's time (``now()``, the default of ``accepted_at``) for the
    new rows.

    ``messages`` is partitioned by ``accepted_at``, so no unique index can hold the id alone and
    two concurrent requests with the same envelope (a client's retry while the first is still
    running, a CLI and its sidecar sending one outbox row) would both insert. The second now
    waits for the first to commit or roll back, then sees its row and answers a replay. The locks
    are taken in key order, so two requests sharing several ids cannot deadlock."""
    keys = sorted({id_lock_key(tenant_id, msg_id) for msg_id in msg_ids})
    # Inside the send's pipelined transaction the locks and the lookup share one round trip.
    lock = await conn.execute(
        """SELECT now() AS now, (SELECT count(*) FROM (
               SELECT pg_advisory_xact_lock(k) FROM unnest(%b::bigint[]) AS k) AS held) AS held""",
        (keys,),
    )
    found = await conn.execute(
        _BY_IDS, (msg_ids, [accepted_since(msg_id) for msg_id in msg_ids], tenant_id)
    )
    existing = {row["id"]: row for row in await found.fetchall()}
    locked = await lock.fetchone()  # arrived with the lookup's result
    assert locked is not None
    return existing, locked["now"]


async def find_message(conn: Conn, tenant_id: uuid.UUID, msg_id: uuid.UUID) -> Row | None:
    cur = await conn.execute(
        f"""{SELECT} WHERE m.tenant_id = %s AND m.id = %s
              AND m.accepted_at >= %s AND m.accepted_at < {ACCEPTED_BEFORE}""",
        (tenant_id, msg_id, accepted_since(msg_id)),
    )
    return await cur.fetchone()


async def set_stream_seq(
    conn: Conn, tenant_id: uuid.UUID, msg_id: uuid.UUID, accepted_at: datetime, seq: int
) -> bool:
    """Whoever learns the sequence first writes it (05 §3); later writers change nothing."""
    cur = await conn.execute(
        """UPDATE messages SET stream_seq = %s
           WHERE tenant_id = %s AND id = %s AND accepted_at = %s AND stream_seq IS NULL""",
        (seq, tenant_id, msg_id, accepted_at),
    )
    return cur.rowcount == 1


async def unpublish_undelivered(conn: Conn, tenant_id: uuid.UUID) -> int:
    """Forget the stream sequence of every message of the tenant still waiting for delivery
    (``accepted`` or ``fetched`` without a transport ack), so the reconciler publishes it
    again (05 §13.2: stream data lost); how many."""
    cur = await conn.execute(
        """UPDATE messages SET stream_seq = NULL, status = 'accepted'
           WHERE tenant_id = %s AND status IN ('accepted', 'fetched')
             AND stream_seq IS NOT NULL""",
        (tenant_id,),
    )
    return cur.rowcount


async def unpublished(
    conn: Conn, tenant_id: uuid.UUID, *, older_than: timedelta, limit: int
) -> list[Row]:
    """Accepted rows without a sequence, oldest first (the ``messages_unpublished`` index);
    the rows of one batch share ``accepted_at``, and their ids keep each lane's send order."""
    cur = await conn.execute(
        f"""{SELECT} WHERE m.tenant_id = %s AND m.stream_seq IS NULL AND m.status = 'accepted'
              AND m.accepted_at < now() - %s::interval
            ORDER BY m.accepted_at, m.id LIMIT %s""",
        (tenant_id, older_than, limit),
    )
    return await cur.fetchall()


async def conversation_messages(
    conn: Conn,
    tenant_id: uuid.UUID,
    conversation_id: uuid.UUID,
    *,
    after: tuple[datetime, uuid.UUID] | None,
    limit: int,
) -> list[Row]:
    """Oldest first by ``accepted_at`` (the ``messages_conv`` index), then id; ``after`` is
    the (accepted_at, id) of the last row of the previous page."""
    at, last = after if after is not None else (None, None)
    cur = await conn.execute(
        f"""{SELECT} WHERE m.tenant_id = %s AND m.conversation_id = %s
              AND (%s::timestamptz IS NULL OR (m.accepted_at, m.id) > (%s, %s))
            ORDER BY m.accepted_at, m.id LIMIT %s""",
        (tenant_id, conversation_id, at, at, last, limit),
    )
    return await cur.fetchall()


async def dead_letter_unpublished(conn: Conn, tenant_id: uuid.UUID, row: Row, reason: str) -> bool:
    """``accepted`` (never published) -> ``dead_lettered``, with the reason in a
    ``delivery_state`` row for the recipient (05 §7.2, §12.1)."""
    cur = await conn.execute(
        """UPDATE messages SET status = 'dead_lettered'
           WHERE tenant_id = %s AND id = %s AND accepted_at = %s
             AND status = 'accepted' AND stream_seq IS NULL""",
        (tenant_id, row["id"], row["accepted_at"]),
    )
    if cur.rowcount != 1:
        return False
    if row["to_agent_id"] is not None:
        await conn.execute(
            """INSERT INTO delivery_state (tenant_id, msg_id, agent_id, dlq_reason)
               VALUES (%s, %s, %s, %s)
               ON CONFLICT (msg_id, agent_id) DO UPDATE SET dlq_reason = EXCLUDED.dlq_reason""",
            (tenant_id, row["id"], row["to_agent_id"], reason),
        )
    return True


async def by_trace(
    conn: Conn,
    tenant_id: uuid.UUID,
    trace_id: str,
    *,
    party: uuid.UUID | None,
    workspace_id: uuid.UUID | None,
    limit: int,
) -> list[Row]:
    """Messages of a trace, oldest first (``messages_trace``): those ``party`` sent or received
    when it is given, those of ``workspace_id`` when it is given."""
    cur = await conn.execute(
        f"""{SELECT} WHERE m.tenant_id = %(tenant)s AND m.trace_id = %(trace)s
              AND (%(party)s::uuid IS NULL OR %(party)s IN (m.from_agent_id, m.to_agent_id))
              AND (%(ws)s::uuid IS NULL OR m.workspace_id = %(ws)s)
            ORDER BY m.accepted_at, m.id LIMIT %(limit)s""",
        {"tenant": tenant_id, "trace": trace_id, "party": party, "ws": workspace_id,
         "limit": limit},
    )  # fmt: skip
    return await cur.fetchall()


async def list_messages(
    conn: Conn,
    tenant_id: uuid.UUID,
    *,
    filters: dict[str, Any],
    before: tuple[datetime, uuid.UUID] | None,
    limit: int,
) -> list[Row]:
    """Newest first, with the recipient's ``dlq_reason``; ``filters`` holds any of
    ``party_agent_id`` (its sender or recipient), ``workspace_id``, ``status``, ``from_agent_id``
    and ``to_agent_id``, and ``before`` the (accepted_at, id) of the last row of the previous
    page."""
    where = ["m.tenant_id = %s"]
    params: list[Any] = [tenant_id]
    if filters.get("party_agent_id") is not None:
        where.append("(m.from_agent_id = %s OR m.to_agent_id = %s)")
        params += [filters["party_agent_id"]] * 2
    for column in ("workspace_id", "status", "from_agent_id", "to_agent_id"):
        if filters.get(column) is not None:
            where.append(f"m.{column} = %s")  # column names from the tuple above, never input
            params.append(filters[column])
    if before is not None:
        where.append("(m.accepted_at, m.id) < (%s, %s)")
        params.extend(before)
    cur = await conn.execute(
        f"""SELECT {_COLUMNS}, d.dlq_reason FROM messages m {_ADDRESSES}
            LEFT JOIN delivery_state d ON d.msg_id = m.id AND d.agent_id = m.to_agent_id
            WHERE {" AND ".join(where)}
            ORDER BY m.accepted_at DESC, m.id DESC LIMIT %s""",
        (*params, limit),
    )
    return await cur.fetchall()
