"""SQLite files that several processes open at once, in WAL mode."""

from __future__ import annotations

import sqlite3
import time

__all__ = ["use_wal"]


def use_wal(conn: sqlite3.Connection, timeout_s: float) -> str:
    """Switch ``conn``'s database to WAL (nothing to do once it is); the journal mode SQLite
    reports.

    Switching a file that is not in WAL yet needs the file to itself, and SQLite refuses with
    "database is locked" at once, whatever the busy timeout, while another connection is writing
    it: a second process opening the same new file at the same moment. So the switch is tried
    again, waiting a little longer each time, until ``timeout_s`` is spent."""
    deadline = time.monotonic() + timeout_s
    pause = 0.005
    while True:
        try:
            return str(conn.execute("PRAGMA journal_mode = WAL").fetchone()[0])
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() + pause > deadline:
                raise
        time.sleep(pause)
        pause = min(pause * 2, 0.2)
