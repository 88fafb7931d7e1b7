"""``usage_local`` (data model §7): usage records the harness adapters captured, kept until the
gateway has them (``POST /v1/usage``). A record's id is derived from what the harness names the
turn by (adapters.usage), so reading the same transcript twice adds nothing."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable
from typing import Any

from agentbus_sidecar.store.db import transaction

__all__ = ["add_usage", "mark_uploaded", "pending_usage"]


def add_usage(conn: sqlite3.Connection, records: Iterable[dict[str, Any]]) -> int:
    """Store records not stored before (by ``id``); how many were new."""
    added = 0
    with transaction(conn):
        for record in records:
            cur = conn.execute(
                "INSERT OR IGNORE INTO usage_local (id, recorded_at, body) VALUES (?, ?, ?)",
                (record["id"], record["recorded_at"], json.dumps(record).encode()),
            )
            added += cur.rowcount
    return added


def pending_usage(conn: sqlite3.Connection, limit: int) -> list[dict[str, Any]]:
    """Records the gateway does not have yet, oldest first."""
    rows = conn.execute(
        "SELECT body FROM usage_local WHERE uploaded = 0 ORDER BY recorded_at, id LIMIT ?",
        (limit,),
    ).fetchall()
    return [json.loads(bytes(row[0])) for row in rows]


def mark_uploaded(conn: sqlite3.Connection, ids: Iterable[str]) -> None:
    with transaction(conn):
        conn.executemany("UPDATE usage_local SET uploaded = 1 WHERE id = ?", [(i,) for i in ids])
