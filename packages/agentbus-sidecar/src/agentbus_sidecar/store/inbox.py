"""The inbox: custody of delivered messages, dedupe, presentation and application acks.

05-DELIVERY-SEMANTICS.md §4 step 5 is one SQLite transaction here: the inbox row, the
``seen_msg_ids`` row and the queued transport ack commit together, before any ack is sent. A
redelivered id (found in ``inbox`` or ``seen_msg_ids``) is acked again and never presented again.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

from wirekit.canonical import canonical_json

from agentbus_sidecar.backoff import nak_delay_ms
from agentbus_sidecar.clock import format_ts, parse_ts
from agentbus_sidecar.store import outbox
from agentbus_sidecar.store.db import transaction

__all__ = [
    "DEFAULT_UNREAD_CAP",
    "Delivery",
    "Outcome",
    "envelope_of",
    "expire_unpresented",
    "get",
    "list_messages",
    "mark_read",
    "mark_transport_acked",
    "present",
    "remove",
    "restore",
    "store_delivery",
    "unread_count",
]

DEFAULT_UNREAD_CAP = 10_000


class Outcome(StrEnum):
    STORED = "stored"
    DUPLICATE = "duplicate"
    EXPIRED = "expired"
    DEFERRED = "deferred"


@dataclass(frozen=True)
class Delivery:
    msg_id: str
    stream_seq: int
    attempt: int
    ack_token: str
    envelope: dict[str, Any]


def _queue_transport_ack(conn: sqlite3.Connection, d: Delivery, now: datetime) -> None:
    body = {"msg_id": d.msg_id, "ack_token": d.ack_token}
    outbox.put(conn, outbox.ack_id(d.msg_id, outbox.TRANSPORT), "ack", body, now)


def _queue_read(conn: sqlite3.Connection, msg_id: str, now: datetime, outcome: str) -> None:
    body = {"msg_id": msg_id, "read_at": format_ts(now), "outcome": outcome}
    outbox.put(conn, outbox.ack_id(msg_id, outbox.APPLICATION), "ack", body, now)


def unread_count(conn: sqlite3.Connection) -> int:
    return int(conn.execute("SELECT count(*) FROM inbox WHERE read_at IS NULL").fetchone()[0])


def _insert(conn: sqlite3.Connection, d: Delivery, now: datetime, *, acked: bool = False) -> None:
    """The inbox row and the ``seen_msg_ids`` row of a message taken into custody; ``acked``:
    its transport ack is already recorded at the gateway."""
    env = d.envelope
    highest = conn.execute(
        "SELECT max(stream_seq) FROM inbox WHERE conversation_id = ? AND from_address = ?",
        (env["conversation"], env["source"]),
    ).fetchone()[0]
    conn.execute(
        "INSERT INTO inbox (msg_id, stream_seq, conversation_id, type, from_address, "
        "trace_id, expires_at, envelope, received_at, attempt, out_of_order, transport_acked) "
        "VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
        (
            d.msg_id,
            d.stream_seq,
            env["conversation"],
            env["type"],
            env["source"],
            str(env["traceparent"]).split("-")[1],
            env.get("expires"),
            canonical_json(env),
            format_ts(now),
            d.attempt,
            int(highest is not None and highest > d.stream_seq),
            int(acked),
        ),
    )
    conn.execute(
        "INSERT INTO seen_msg_ids (msg_id, seen_at) VALUES (?, ?)", (d.msg_id, format_ts(now))
    )


def _known(conn: sqlite3.Connection, msg_id: str) -> bool:
    return bool(
        conn.execute("SELECT 1 FROM inbox WHERE msg_id = ?", (msg_id,)).fetchone()
        or conn.execute("SELECT 1 FROM seen_msg_ids WHERE msg_id = ?", (msg_id,)).fetchone()
    )


def restore(conn: sqlite3.Connection, d: Delivery, now: datetime) -> Outcome:
    """Take back a verified message the gateway delivered to this agent before its state.db
    was lost (05 §10.5): stored as if just received, with no transport ack queued (the gateway
    has recorded one); a message known here, or expired, is left alone."""
    with transaction(conn):
        if _known(conn, d.msg_id):
            return Outcome.DUPLICATE
        expires = d.envelope.get("expires")
        if isinstance(expires, str) and parse_ts(expires) <= now:
            return Outcome.EXPIRED
        _insert(conn, d, now, acked=True)
    return Outcome.STORED


def store_delivery(
    conn: sqlite3.Connection,
    d: Delivery,
    now: datetime,
    *,
    unread_cap: int | None = DEFAULT_UNREAD_CAP,
) -> Outcome:
    """Take custody of one verified delivery, or recognise it as a duplicate."""
    env = d.envelope
    with transaction(conn):
        if conn.execute("SELECT 1 FROM inbox WHERE msg_id = ?", (d.msg_id,)).fetchone():
            conn.execute(
                "UPDATE inbox SET redelivery = redelivery + 1, attempt = max(attempt, ?) "
                "WHERE msg_id = ?",
                (d.attempt, d.msg_id),
            )
            _queue_transport_ack(conn, d, now)
            return Outcome.DUPLICATE
        if conn.execute("SELECT 1 FROM seen_msg_ids WHERE msg_id = ?", (d.msg_id,)).fetchone():
            _queue_transport_ack(conn, d, now)
            return Outcome.DUPLICATE
        expires = env.get("expires")
        if isinstance(expires, str) and parse_ts(expires) <= now:
            conn.execute(
                "INSERT INTO seen_msg_ids (msg_id, seen_at) VALUES (?, ?)",
                (d.msg_id, format_ts(now)),
            )
            _queue_transport_ack(conn, d, now)
            _queue_read(conn, d.msg_id, now, "expired")
            return Outcome.EXPIRED
        if unread_cap is not None and unread_count(conn) >= unread_cap:
            body = {
                "msg_id": d.msg_id,
                "ack_token": d.ack_token,
                "delay_ms": nak_delay_ms(d.attempt),
                "reason": "inbox_full",
            }
            outbox.put(conn, outbox.nak_id(d.msg_id), "nak", body, now)
            return Outcome.DEFERRED
        _insert(conn, d, now)
        _queue_transport_ack(conn, d, now)
    return Outcome.STORED


def mark_transport_acked(conn: sqlite3.Connection, msg_id: str) -> None:
    with transaction(conn):
        conn.execute("UPDATE inbox SET transport_acked = 1 WHERE msg_id = ?", (msg_id,))
        conn.execute("DELETE FROM outbox WHERE id = ?", (outbox.ack_id(msg_id, outbox.TRANSPORT),))


def remove(conn: sqlite3.Connection, msg_id: str) -> None:
    """Drop a row the gateway called terminal; ``seen_msg_ids`` keeps the id for dedupe."""
    with transaction(conn):
        conn.execute("DELETE FROM inbox WHERE msg_id = ?", (msg_id,))
        conn.execute("DELETE FROM outbox WHERE id = ?", (outbox.ack_id(msg_id, outbox.TRANSPORT),))


def get(conn: sqlite3.Connection, msg_id: str) -> sqlite3.Row | None:
    row: sqlite3.Row | None = conn.execute(
        "SELECT * FROM inbox WHERE msg_id = ?", (msg_id,)
    ).fetchone()
    return row


def first_reply(conn: sqlite3.Connection, msg_id: str, now: datetime) -> sqlite3.Row | None:
    """The first stored, unexpired message (in ``stream_seq`` order) whose ``correlation`` is
    ``msg_id``: the answer to it (``agentbus reply`` correlates with the message answered)."""
    row: sqlite3.Row | None = conn.execute(
        "SELECT * FROM inbox WHERE transport_acked = 1 "
        "AND json_extract(CAST(envelope AS TEXT), '$.correlation') = ? "
        "AND (expires_at IS NULL OR expires_at > ?) ORDER BY stream_seq, msg_id LIMIT 1",
        (msg_id, format_ts(now)),
    ).fetchone()
    return row


def envelope_of(row: sqlite3.Row) -> dict[str, Any]:
    value: dict[str, Any] = json.loads(bytes(row["envelope"]))
    return value


def present(conn: sqlite3.Connection, now: datetime, limit: int = 100) -> list[sqlite3.Row]:
    """Offer presentable rows in ``stream_seq`` order and stamp ``presented_at`` (05 §4)."""
    stamp = format_ts(now)
    with transaction(conn):
        found = conn.execute(
            "SELECT * FROM inbox WHERE transport_acked = 1 AND presented_at IS NULL "
            "AND read_at IS NULL AND (expires_at IS NULL OR expires_at > ?) "
            "ORDER BY stream_seq, msg_id LIMIT ?",
            (stamp, limit),
        ).fetchall()
        conn.executemany(
            "UPDATE inbox SET presented_at = ? WHERE msg_id = ?",
            [(stamp, row["msg_id"]) for row in found],
        )
    return found


def list_messages(conn: sqlite3.Connection, *, include_read: bool = False) -> list[sqlite3.Row]:
    """Rows already presented (and, unless ``include_read``, not yet read)."""
    where = "presented_at IS NOT NULL" + ("" if include_read else " AND read_at IS NULL")
    return conn.execute(f"SELECT * FROM inbox WHERE {where} ORDER BY stream_seq, msg_id").fetchall()


def mark_read(conn: sqlite3.Connection, msg_id: str, now: datetime) -> bool:
    """Application ack: ``read_at``, ``app_acked`` and a queued read. False if not applicable."""
    with transaction(conn):
        changed = conn.execute(
            "UPDATE inbox SET read_at = ?, presented_at = coalesce(presented_at, ?) "
            "WHERE msg_id = ? AND transport_acked = 1 AND read_at IS NULL",
            (format_ts(now), format_ts(now), msg_id),
        ).rowcount
        if not changed:
            return False
        conn.execute("UPDATE seen_msg_ids SET app_acked = 1 WHERE msg_id = ?", (msg_id,))
        _queue_read(conn, msg_id, now, "read")
    return True


def expire_unpresented(conn: sqlite3.Connection, now: datetime) -> list[str]:
    """Drop unread rows whose ``expires_at`` passed before presentation; report them expired."""
    with transaction(conn):
        ids = [
            str(row[0])
            for row in conn.execute(
                "SELECT msg_id FROM inbox WHERE transport_acked = 1 AND presented_at IS NULL "
                "AND read_at IS NULL AND expires_at IS NOT NULL AND expires_at <= ?",
                (format_ts(now),),
            )
        ]
        for msg_id in ids:
            conn.execute("UPDATE inbox SET read_at = ? WHERE msg_id = ?", (format_ts(now), msg_id))
            _queue_read(conn, msg_id, now, "expired")
    return ids
