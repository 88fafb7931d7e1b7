"""Receipts for what this agent sent, so ``agentbus trace`` has the local half offline.

``local_events`` is a JSON array of ``{event, at}`` in the order they happened: ``queued``
(the outbox row was written), ``accepted`` (the gateway's receipt), ``published`` (a stream
sequence became known) and any terminal status learned later.
"""

from __future__ import annotations

import json
import sqlite3
from datetime import datetime
from typing import Any

from agentbus_sidecar.clock import format_ts
from agentbus_sidecar.store.db import transaction

__all__ = [
    "add_event",
    "events_of",
    "find",
    "note_status",
    "record",
    "set_stream_seq",
    "unpublished",
]


def events_of(row: sqlite3.Row) -> list[dict[str, str]]:
    events: list[dict[str, str]] = json.loads(row["local_events"])
    return events


def record(
    conn: sqlite3.Connection,
    receipt: dict[str, Any],
    envelope: dict[str, Any],
    *,
    queued_at: str,
    accepted_at: str,
) -> None:
    """Store the receipt of an accepted send (a replay may bring a newer receipt)."""
    events = [{"event": "queued", "at": queued_at}, {"event": "accepted", "at": accepted_at}]
    if receipt.get("seq") is not None:
        events.append({"event": "published", "at": accepted_at})
    with transaction(conn):
        conn.execute(
            "INSERT INTO receipts (rcp_id, msg_id, stream_seq, accepted_at, to_address, type, "
            "local_events) VALUES (?,?,?,?,?,?,?) ON CONFLICT (rcp_id) DO NOTHING",
            (
                receipt["id"],
                envelope["id"],
                receipt.get("seq"),
                accepted_at,
                envelope["recipient"],
                envelope["type"],
                json.dumps(events),
            ),
        )


def add_event(conn: sqlite3.Connection, rcp_id: str, event: str, now: datetime) -> None:
    with transaction(conn):
        row = conn.execute("SELECT * FROM receipts WHERE rcp_id = ?", (rcp_id,)).fetchone()
        if row is None:
            return
        events = [*events_of(row), {"event": event, "at": format_ts(now)}]
        conn.execute(
            "UPDATE receipts SET local_events = ? WHERE rcp_id = ?", (json.dumps(events), rcp_id)
        )


def note_status(conn: sqlite3.Connection, msg_id: str, status: str, now: datetime) -> bool:
    """Add a status the gateway announced for a message this agent sent (a ``status`` frame)
    to its newest receipt, once: False when there is no receipt or it has that event already.
    Notices are best effort and may repeat, so a repeat changes nothing."""
    with transaction(conn):
        row = find(conn, msg_id)
        if row is None or row["msg_id"] != msg_id:
            return False
        if any(e.get("event") == status for e in events_of(row)):
            return False
        add_event(conn, str(row["rcp_id"]), status, now)
        return True


def set_stream_seq(conn: sqlite3.Connection, rcp_id: str, seq: int, now: datetime) -> None:
    with transaction(conn):
        changed = conn.execute(
            "UPDATE receipts SET stream_seq = ? WHERE rcp_id = ? AND stream_seq IS NULL",
            (seq, rcp_id),
        ).rowcount
        if changed:
            add_event(conn, rcp_id, "published", now)


def find(conn: sqlite3.Connection, ident: str) -> sqlite3.Row | None:
    """The newest receipt for a ``rcp_`` or ``msg_`` id."""
    row: sqlite3.Row | None = conn.execute(
        "SELECT * FROM receipts WHERE rcp_id = ? OR msg_id = ? ORDER BY rcp_id DESC LIMIT 1",
        (ident, ident),
    ).fetchone()
    return row


def unpublished(conn: sqlite3.Connection) -> list[sqlite3.Row]:
    return conn.execute(
        "SELECT * FROM receipts WHERE stream_seq IS NULL ORDER BY accepted_at"
    ).fetchall()
