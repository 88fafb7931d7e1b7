"""The outbox: sends, acks and naks waiting for the gateway (data model §7, 05 §3, §4).

Row ids follow the data model: the ``msg_`` id for a send, ``ack:<msg_id>:<level>`` for an
ack, where level is ``transport``, ``application`` (a read) or ``term`` (a refusal, which
JetStream also treats as an ack), and ``nak:<msg_id>`` for a nak. A row is deleted once the
gateway has answered for it. A failed try bumps ``attempts`` and moves ``next_attempt_at`` out by
the backoff; a send the gateway refused for good is parked: it keeps ``last_error`` and its
``next_attempt_at`` is set past every real time, so it is never due again but stays visible to
``agentbus outbox`` and ``agentbus doctor``.
"""

from __future__ import annotations

import json
import random
import sqlite3
from datetime import datetime, timedelta
from typing import Any

from wirekit.canonical import canonical_json

from agentbus_sidecar.backoff import retry_delay_s
from agentbus_sidecar.clock import format_ts
from agentbus_sidecar.store.db import transaction

__all__ = [
    "APPLICATION",
    "PARKED",
    "TERM",
    "TRANSPORT",
    "ack_id",
    "delete",
    "due",
    "enqueue_send",
    "get",
    "nak_id",
    "park",
    "pending_sends",
    "put",
    "queued_envelope",
    "record_failure",
    "requeue_send",
    "rows",
]

TRANSPORT, APPLICATION, TERM = "transport", "application", "term"
PARKED = "9999-12-31T23:59:59.999Z"


def ack_id(msg_id: str, level: str) -> str:
    return f"ack:{msg_id}:{level}"


def nak_id(msg_id: str) -> str:
    return f"nak:{msg_id}"


def put(
    conn: sqlite3.Connection, row_id: str, kind: str, body: dict[str, Any], now: datetime
) -> None:
    """Queue a row, or replace the body of the queued one (a redelivery brings a new token)."""
    with transaction(conn):
        conn.execute(
            "INSERT INTO outbox (id, kind, body, created_at, next_attempt_at) VALUES (?,?,?,?,?) "
            "ON CONFLICT (id) DO UPDATE SET body = excluded.body, "
            "next_attempt_at = excluded.next_attempt_at",
            (row_id, kind, canonical_json(body), format_ts(now), format_ts(now)),
        )


def enqueue_send(conn: sqlite3.Connection, envelope: dict[str, Any], now: datetime) -> None:
    """Queue a signed envelope; retries always resend these exact bytes."""
    with transaction(conn):
        conn.execute(
            "INSERT INTO outbox (id, kind, body, created_at, next_attempt_at) "
            "VALUES (?, 'send', ?, ?, ?)",
            (envelope["id"], canonical_json(envelope), format_ts(now), format_ts(now)),
        )


def due(conn: sqlite3.Connection, now: datetime, kinds: tuple[str, ...]) -> list[sqlite3.Row]:
    marks = ",".join("?" * len(kinds))
    return conn.execute(
        f"SELECT * FROM outbox WHERE next_attempt_at <= ? AND kind IN ({marks}) "
        "ORDER BY next_attempt_at, id",
        (format_ts(now), *kinds),
    ).fetchall()


def pending_sends(conn: sqlite3.Connection) -> list[sqlite3.Row]:
    """Every send not parked, oldest id (so oldest message) first."""
    return conn.execute(
        "SELECT * FROM outbox WHERE kind = 'send' AND next_attempt_at < ? ORDER BY id", (PARKED,)
    ).fetchall()


def get(conn: sqlite3.Connection, row_id: str) -> sqlite3.Row | None:
    row: sqlite3.Row | None = conn.execute(
        "SELECT * FROM outbox WHERE id = ?", (row_id,)
    ).fetchone()
    return row


def queued_envelope(conn: sqlite3.Connection, msg_id: str) -> dict[str, Any] | None:
    """The envelope of a send still in the outbox (queued or parked)."""
    row = conn.execute(
        "SELECT body FROM outbox WHERE id = ? AND kind = 'send'", (msg_id,)
    ).fetchone()
    if row is None:
        return None
    envelope: dict[str, Any] = json.loads(bytes(row[0]))
    return envelope


def rows(conn: sqlite3.Connection, *, kind: str | None = None) -> list[sqlite3.Row]:
    if kind is None:
        return conn.execute("SELECT * FROM outbox ORDER BY created_at, id").fetchall()
    return conn.execute(
        "SELECT * FROM outbox WHERE kind = ? ORDER BY created_at, id", (kind,)
    ).fetchall()


def record_failure(
    conn: sqlite3.Connection,
    row_id: str,
    now: datetime,
    error: str,
    *,
    retry_after_s: float | None = None,
    rng: random.Random | None = None,
) -> datetime | None:
    """Count a failed try and schedule the next; returns when it is due (None if row is gone)."""
    with transaction(conn):
        row = conn.execute("SELECT attempts FROM outbox WHERE id = ?", (row_id,)).fetchone()
        if row is None:
            return None
        attempts = int(row["attempts"]) + 1
        delay = retry_delay_s(attempts, retry_after_s=retry_after_s, rng=rng)
        next_at = now + timedelta(seconds=delay)
        conn.execute(
            "UPDATE outbox SET attempts = ?, next_attempt_at = ?, last_error = ? WHERE id = ?",
            (attempts, format_ts(next_at), error[:2000], row_id),
        )
    return next_at


def requeue_send(conn: sqlite3.Connection, envelope: dict[str, Any], now: datetime) -> None:
    """A parked send back in line with a new body (signed again): due now, its tries and error
    forgotten."""
    with transaction(conn):
        conn.execute(
            "UPDATE outbox SET body = ?, next_attempt_at = ?, attempts = 0, last_error = NULL "
            "WHERE id = ? AND kind = 'send'",
            (canonical_json(envelope), format_ts(now), envelope["id"]),
        )


def park(conn: sqlite3.Connection, row_id: str, error: str) -> None:
    with transaction(conn):
        conn.execute(
            "UPDATE outbox SET attempts = attempts + 1, next_attempt_at = ?, last_error = ? "
            "WHERE id = ?",
            (PARKED, error[:2000], row_id),
        )


def delete(conn: sqlite3.Connection, row_id: str) -> None:
    with transaction(conn):
        conn.execute("DELETE FROM outbox WHERE id = ?", (row_id,))
