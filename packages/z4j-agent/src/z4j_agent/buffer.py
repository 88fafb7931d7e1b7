"""The durable local buffer: a bounded FIFO of events in one SQLite file, shared by processes.

One file serves a whole Celery worker node: the main process and every prefork child append to
it, and exactly one process, the holder of the ``shipper`` lease, sends its events to the brain
and deletes them once the brain acknowledged them. So nothing is handed between processes in
memory, a worker restart finds the events it had not shipped, and one connection per node reaches
the brain.

Choices:
- WAL with ``synchronous=NORMAL``: a commit survives the crash or kill of any process (the WAL
  is in the OS page cache), and only an OS crash or power loss can roll back the last commits;
  FULL would add an fsync to every event a task records, in the task's own process.
- Every write is one ``BEGIN IMMEDIATE`` transaction, so writers from several processes queue on
  SQLite's file lock (with a busy timeout) instead of failing on a lock upgrade.
- Ids come from AUTOINCREMENT, so an id is never reused and a late ack cannot delete a newer event.
- The size is a counter kept in the same transactions, so bounding costs no ``count(*)``.
- A new file is switched to WAL by ``wirekit.sqlitewal.use_wal``, which waits for a sibling
  prefork child that is writing it at the same moment instead of failing the first append.
- A connection belongs to the process that opened it: after ``fork`` the child opens its own.
  Our SQLite calls hold one lock per process that is also taken around ``fork``, so a child never
  inherits SQLite's internal mutexes mid-call.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from wirekit.sqlitewal import use_wal

_LOCK = threading.RLock()
# Connections inherited across fork are kept referenced, never used or closed in the child:
# closing one there could checkpoint or unlink the WAL under the parent.
_INHERITED: list[sqlite3.Connection] = []


def _reset_lock() -> None:
    global _LOCK
    _LOCK = threading.RLock()


os.register_at_fork(
    before=lambda: _LOCK.acquire(),
    after_in_parent=lambda: _LOCK.release(),
    after_in_child=_reset_lock,
)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS events (id INTEGER PRIMARY KEY AUTOINCREMENT, body TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS counters (name TEXT PRIMARY KEY, value INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS lease (name TEXT PRIMARY KEY, owner TEXT NOT NULL, expires_at REAL);
INSERT OR IGNORE INTO counters (name, value) VALUES ('size', 0), ('dropped', 0);
"""


class EventBuffer:
    """Append events, peek the oldest, ack (delete) what the brain confirmed."""

    def __init__(self, path: Path | str, max_events: int = 100_000, busy_timeout: float = 30.0):
        self.path = Path(path)
        self.max_events = max_events
        self._busy_ms = int(busy_timeout * 1000)
        self._conn_pid = 0
        self._connection: sqlite3.Connection | None = None

    def _conn(self) -> sqlite3.Connection:
        if self._connection is not None and self._conn_pid == os.getpid():
            return self._connection
        if self._connection is not None:
            _INHERITED.append(self._connection)
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        os.close(os.open(self.path, os.O_CREAT | os.O_RDWR, 0o600))  # events may hold data
        conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        conn.execute(f"PRAGMA busy_timeout = {self._busy_ms}")
        try:
            use_wal(conn, self._busy_ms / 1000)
        except sqlite3.OperationalError:
            conn.close()
            raise
        conn.execute("PRAGMA synchronous = NORMAL")
        conn.execute("BEGIN IMMEDIATE")
        try:
            for statement in filter(str.strip, _SCHEMA.split(";")):
                conn.execute(statement)
        except BaseException:
            conn.execute("ROLLBACK")
            conn.close()
            raise
        conn.execute("COMMIT")
        self._connection, self._conn_pid = conn, os.getpid()
        return conn

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Cursor]:
        with _LOCK:
            conn = self._conn()
            cur = conn.cursor()
            cur.execute("BEGIN IMMEDIATE")
            try:
                yield cur
            except BaseException:
                cur.execute("ROLLBACK")
                raise
            cur.execute("COMMIT")

    def append(self, events: Iterable[dict[str, Any] | str]) -> int:
        """Store events (dicts or JSON text); returns how many old events were dropped."""
        bodies = [e if isinstance(e, str) else json.dumps(e, separators=(",", ":")) for e in events]
        if not bodies:
            return 0
        with self._write() as cur:
            cur.executemany("INSERT INTO events (body) VALUES (?)", [(b,) for b in bodies])
            size = self._bump(cur, "size", len(bodies))
            overflow = size - self.max_events
            if overflow <= 0:
                return 0
            cur.execute(
                "DELETE FROM events WHERE id IN (SELECT id FROM events ORDER BY id LIMIT ?)",
                (overflow,),
            )
            dropped = cur.rowcount
            self._bump(cur, "size", -dropped)
            self._bump(cur, "dropped", dropped)
            return dropped

    @staticmethod
    def _bump(cur: sqlite3.Cursor, name: str, delta: int) -> int:
        cur.execute(
            "UPDATE counters SET value = value + ? WHERE name = ? RETURNING value", (delta, name)
        )
        return int(cur.fetchone()[0])

    def peek(self, limit: int) -> list[tuple[int, str]]:
        """The oldest ``limit`` events as (id, JSON text), oldest first."""
        with _LOCK:
            rows = (
                self._conn()
                .execute("SELECT id, body FROM events ORDER BY id LIMIT ?", (limit,))
                .fetchall()
            )
        return [(int(row[0]), str(row[1])) for row in rows]

    def ack(self, ids: Sequence[int], *, dropped: bool = False) -> int:
        """Delete the events with these ids (counting them as dropped if they could not be
        shipped); returns how many existed."""
        deleted = 0
        with self._write() as cur:
            for start in range(0, len(ids), 500):
                chunk = list(ids[start : start + 500])
                marks = ",".join("?" * len(chunk))
                cur.execute(f"DELETE FROM events WHERE id IN ({marks})", chunk)
                deleted += cur.rowcount
            if deleted:
                self._bump(cur, "size", -deleted)
                if dropped:
                    self._bump(cur, "dropped", deleted)
        return deleted

    def stats(self) -> tuple[int, int]:
        """(events buffered, events dropped since the file began: the buffer was full, or an
        event could not be shipped)."""
        with _LOCK:
            rows = dict(self._conn().execute("SELECT name, value FROM counters").fetchall())
        return int(rows.get("size", 0)), int(rows.get("dropped", 0))

    @property
    def size(self) -> int:
        return self.stats()[0]

    @property
    def dropped(self) -> int:
        return self.stats()[1]

    def try_lead(self, owner: str, ttl: float) -> bool:
        """Take or renew the shipper lease; False while another live owner holds it."""
        now = time.time()
        with self._write() as cur:
            row = cur.execute(
                "SELECT owner, expires_at FROM lease WHERE name = 'shipper'"
            ).fetchone()
            if row is not None and row[0] != owner and float(row[1]) > now:
                return False
            cur.execute(
                "INSERT OR REPLACE INTO lease (name, owner, expires_at) VALUES ('shipper', ?, ?)",
                (owner, now + ttl),
            )
            return True

    def release(self, owner: str) -> None:
        with self._write() as cur:
            cur.execute("DELETE FROM lease WHERE name = 'shipper' AND owner = ?", (owner,))

    def close(self) -> None:
        with _LOCK:
            if self._connection is not None and self._conn_pid == os.getpid():
                self._connection.close()
            self._connection = None
