"""Small key-value state: the ``meta`` table and harness adapters' ``adapter_state``."""

from __future__ import annotations

import sqlite3
from datetime import datetime

from agentbus_sidecar.clock import format_ts
from agentbus_sidecar.store.db import transaction

__all__ = ["get_adapter_state", "get_meta", "set_adapter_state", "set_meta"]


def get_meta(conn: sqlite3.Connection, key: str) -> str | None:
    row = conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
    return None if row is None else str(row[0])


def set_meta(conn: sqlite3.Connection, key: str, value: str) -> None:
    with transaction(conn):
        conn.execute(
            "INSERT INTO meta (key, value) VALUES (?, ?) "
            "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            (key, value),
        )


def get_adapter_state(conn: sqlite3.Connection, adapter: str, key: str) -> str | None:
    row = conn.execute(
        "SELECT value FROM adapter_state WHERE adapter = ? AND key = ?", (adapter, key)
    ).fetchone()
    return None if row is None else str(row[0])


def set_adapter_state(
    conn: sqlite3.Connection, adapter: str, key: str, value: str, now: datetime
) -> None:
    with transaction(conn):
        conn.execute(
            "INSERT INTO adapter_state (adapter, key, value, updated_at) VALUES (?,?,?,?) "
            "ON CONFLICT (adapter, key) DO UPDATE SET value = excluded.value, "
            "updated_at = excluded.updated_at",
            (adapter, key, value, format_ts(now)),
        )
