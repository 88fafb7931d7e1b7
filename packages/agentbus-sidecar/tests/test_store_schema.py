"""state.db is exactly data model §7: tables, columns, indexes, pragmas, versioning."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest
from agentbus_sidecar.errors import StoreError
from agentbus_sidecar.store import open_store, state_db_path
from agentbus_sidecar.store.meta import get_adapter_state, get_meta, set_adapter_state
from agentbus_sidecar.store.schema import LATEST
from wirekit.testing import writing_new_file

# (name, type, not null, default, primary key position) per table, in §7's column order.
EXPECTED = {
    "meta": [("key", "TEXT", 0, None, 1), ("value", "TEXT", 1, None, 0)],
    "inbox": [
        ("msg_id", "TEXT", 0, None, 1),
        ("stream_seq", "INTEGER", 1, None, 0),
        ("conversation_id", "TEXT", 1, None, 0),
        ("type", "TEXT", 1, None, 0),
        ("from_address", "TEXT", 1, None, 0),
        ("trace_id", "TEXT", 1, None, 0),
        ("expires_at", "TEXT", 0, None, 0),
        ("envelope", "BLOB", 1, None, 0),
        ("received_at", "TEXT", 1, None, 0),
        ("transport_acked", "INTEGER", 1, "0", 0),
        ("presented_at", "TEXT", 0, None, 0),
        ("read_at", "TEXT", 0, None, 0),
        ("redelivery", "INTEGER", 1, "0", 0),
        ("out_of_order", "INTEGER", 1, "0", 0),
        ("attempt", "INTEGER", 1, "1", 0),
    ],
    "outbox": [
        ("id", "TEXT", 0, None, 1),
        ("kind", "TEXT", 1, None, 0),
        ("body", "BLOB", 1, None, 0),
        ("created_at", "TEXT", 1, None, 0),
        ("attempts", "INTEGER", 1, "0", 0),
        ("next_attempt_at", "TEXT", 1, None, 0),
        ("last_error", "TEXT", 0, None, 0),
    ],
    "receipts": [
        ("rcp_id", "TEXT", 0, None, 1),
        ("msg_id", "TEXT", 1, None, 0),
        ("stream_seq", "INTEGER", 0, None, 0),
        ("accepted_at", "TEXT", 1, None, 0),
        ("to_address", "TEXT", 1, None, 0),
        ("type", "TEXT", 1, None, 0),
        ("local_events", "TEXT", 1, None, 0),
    ],
    "seen_msg_ids": [
        ("msg_id", "TEXT", 0, None, 1),
        ("seen_at", "TEXT", 1, None, 0),
        ("app_acked", "INTEGER", 1, "0", 0),
    ],
    "adapter_state": [
        ("adapter", "TEXT", 1, None, 1),
        ("key", "TEXT", 1, None, 2),
        ("value", "TEXT", 1, None, 0),
        ("updated_at", "TEXT", 1, None, 0),
    ],
    "usage_local": [
        ("id", "TEXT", 0, None, 1),
        ("recorded_at", "TEXT", 1, None, 0),
        ("body", "BLOB", 1, None, 0),
        ("uploaded", "INTEGER", 1, "0", 0),
    ],
}


def test_tables_and_columns_are_those_of_the_data_model(db: sqlite3.Connection) -> None:
    tables = {
        row[0]
        for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
        if not row[0].startswith("sqlite_")
    }
    assert tables == set(EXPECTED)
    for table, columns in EXPECTED.items():
        info = [tuple(row)[1:] for row in db.execute(f"PRAGMA table_info({table})")]
        assert info == columns, table


def test_indexes_and_constraints(db: sqlite3.Connection) -> None:
    indexes = {
        row[0]: row[1]
        for row in db.execute("SELECT name, sql FROM sqlite_master WHERE type = 'index'")
        if row[1] is not None
    }
    assert set(indexes) == {"inbox_unread", "inbox_seq", "outbox_due"}
    assert "WHERE read_at IS NULL" in indexes["inbox_unread"]
    assert "(next_attempt_at)" in indexes["outbox_due"]
    with pytest.raises(sqlite3.IntegrityError, match="CHECK"):
        db.execute(
            "INSERT INTO outbox (id, kind, body, created_at, next_attempt_at) "
            "VALUES ('x', 'bogus', x'00', 'now', 'now')"
        )


def test_wal_and_synchronous_full(db: sqlite3.Connection) -> None:
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert db.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL


def test_version_is_recorded_and_reopening_is_idempotent(tmp_path: Path) -> None:
    path = state_db_path("agt_" + "a" * 32, tmp_path)
    assert path == tmp_path / "agents" / ("agt_" + "a" * 32) / "state.db"
    for _ in range(2):
        conn = open_store(path)
        assert conn.execute("PRAGMA user_version").fetchone()[0] == LATEST
        assert get_meta(conn, "schema_version") == str(LATEST)
        conn.close()


def test_a_new_file_another_process_is_writing_is_waited_for(tmp_path: Path) -> None:
    """Two processes creating the same state.db at once (a hook beside a starting sidecar): the
    second waits for the first instead of failing on the switch to WAL."""
    path = tmp_path / "state.db"
    with writing_new_file(path) as release:
        threading.Timer(0.3, release.set).start()
        conn = open_store(path)
        assert conn.execute("PRAGMA user_version").fetchone()[0] == LATEST
        conn.close()


def test_a_newer_schema_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    open_store(path).close()
    raw = sqlite3.connect(path)
    raw.execute(f"PRAGMA user_version = {LATEST + 1}")
    raw.close()
    with pytest.raises(StoreError, match="downgrades are refused"):
        open_store(path)


def test_adapter_state_round_trip(db: sqlite3.Connection) -> None:
    from agentbus_sidecar.clock import utcnow

    assert get_adapter_state(db, "codex", "thread") is None
    set_adapter_state(db, "codex", "thread", "t-1", utcnow())
    set_adapter_state(db, "codex", "thread", "t-2", utcnow())
    assert get_adapter_state(db, "codex", "thread") == "t-2"
