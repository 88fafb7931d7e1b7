"""Local retention rules of data model §7."""

from __future__ import annotations

import sqlite3
from datetime import timedelta

from agentbus_sidecar.clock import format_ts, utcnow
from agentbus_sidecar.store.retention import prune


def test_retention_rules(db: sqlite3.Connection) -> None:
    now = utcnow()

    def ago(days: float) -> str:
        return format_ts(now - timedelta(days=days))

    inbox_rows = {"read_8d": ago(8), "read_6d": ago(6), "unread_old": None}
    for msg_id, read_at in inbox_rows.items():
        db.execute(
            "INSERT INTO inbox (msg_id, stream_seq, conversation_id, type, from_address, "
            "trace_id, envelope, received_at, transport_acked, presented_at, read_at) "
            "VALUES (?, 1, 'c', 't', 'f', 'tr', x'7b7d', ?, 1, ?, ?)",
            (msg_id, ago(40), ago(40), read_at),
        )
    for rcp_id, days in (("rcp_old", 31), ("rcp_new", 29)):
        db.execute(
            "INSERT INTO receipts VALUES (?, 'm', 1, ?, 'agent://a/b/c', 't', '[]')",
            (rcp_id, ago(days)),
        )
    for msg_id, days in (("seen_old", 8), ("seen_new", 6)):
        db.execute("INSERT INTO seen_msg_ids (msg_id, seen_at) VALUES (?, ?)", (msg_id, ago(days)))
    for usage_id, days, uploaded in (
        ("usg_up_old", 8, 1),
        ("usg_up_new", 6, 1),
        ("usg_kept", 30, 0),
    ):
        db.execute(
            "INSERT INTO usage_local (id, recorded_at, body, uploaded) VALUES (?, ?, x'7b7d', ?)",
            (usage_id, ago(days), uploaded),
        )
    db.execute(
        "INSERT INTO outbox (id, kind, body, created_at, next_attempt_at) "
        "VALUES ('msg_x', 'send', x'7b7d', ?, ?)",
        (ago(90), ago(90)),
    )

    assert prune(db, now) == {"inbox": 1, "receipts": 1, "seen_msg_ids": 1, "usage_local": 1}

    def ids(sql: str) -> set[str]:
        return {row[0] for row in db.execute(sql)}

    assert ids("SELECT msg_id FROM inbox") == {"read_6d", "unread_old"}
    assert ids("SELECT rcp_id FROM receipts") == {"rcp_new"}
    assert ids("SELECT msg_id FROM seen_msg_ids") == {"seen_new"}
    assert ids("SELECT id FROM outbox") == {"msg_x"}  # outbox rows go only on success
    # a record not uploaded yet is kept however old it is: the gateway does not have it
    assert ids("SELECT id FROM usage_local") == {"usg_up_new", "usg_kept"}
    assert prune(db, now) == {"inbox": 0, "receipts": 0, "seen_msg_ids": 0, "usage_local": 0}
