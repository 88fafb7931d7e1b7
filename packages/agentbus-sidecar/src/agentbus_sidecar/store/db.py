"""Opening state.db: location, pragmas, migrations, and the one transaction helper.

Durability settings are those of data model §7: WAL and ``synchronous = FULL``, so a commit is
on disk (WAL fsynced) before the transport ack that depends on it is sent, and survives power
loss, not only a process kill. Connections run in autocommit mode and every write unit is an
explicit ``BEGIN IMMEDIATE`` transaction, which takes the write lock up front: two processes
(the sidecar loop and a CLI command) then queue on the busy timeout instead of failing on a lock
upgrade halfway through a read-then-write.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from wirekit.sqlitewal import use_wal

from agentbus_sidecar.errors import StoreError
from agentbus_sidecar.store.schema import LATEST, MIGRATIONS

__all__ = ["default_state_dir", "open_store", "state_db_path", "transaction"]

BUSY_TIMEOUT_MS = 5000


def default_state_dir() -> Path:
    if explicit := os.environ.get("AGENTBUS_STATE_DIR"):
        return Path(explicit)
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "agentbus"


def state_db_path(agent_id: str, base: Path | None = None) -> Path:
    """``$XDG_STATE_HOME/agentbus/agents/<agent_id>/state.db``."""
    return (base or default_state_dir()) / "agents" / agent_id / "state.db"


@contextmanager
def transaction(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """``BEGIN IMMEDIATE`` ... ``COMMIT``; joins a transaction that is already open."""
    if conn.in_transaction:
        yield conn
        return
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn
    except BaseException:
        conn.rollback()
        raise
    conn.execute("COMMIT")


def _migrate(conn: sqlite3.Connection) -> None:
    with transaction(conn):
        version = int(conn.execute("PRAGMA user_version").fetchone()[0])
        if version > LATEST:
            raise StoreError(
                f"state.db has schema version {version}, newer than this sidecar's {LATEST}; "
                "upgrade the sidecar (downgrades are refused)"
            )
        for target in range(version + 1, LATEST + 1):
            for statement in _statements(MIGRATIONS[target - 1]):
                conn.execute(statement)
            conn.execute(f"PRAGMA user_version = {target}")
            conn.execute(
                "INSERT INTO meta (key, value) VALUES ('schema_version', ?) "
                "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (str(target),),
            )


def _statements(script: str) -> list[str]:
    # executescript() would COMMIT the open transaction first; run statement by statement so
    # the DDL and the version bump commit together.
    return [part.strip() for part in script.split(";") if part.strip()]


def open_store(path: Path) -> sqlite3.Connection:
    """Open (creating if needed) and migrate a state.db; the caller closes it."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    conn = sqlite3.connect(path, isolation_level=None, timeout=BUSY_TIMEOUT_MS / 1000)
    try:
        conn.row_factory = sqlite3.Row
        mode = use_wal(conn, BUSY_TIMEOUT_MS / 1000)  # another process may be creating it too
        if str(mode).lower() != "wal":
            raise StoreError(f"state.db at {path} cannot use WAL (journal mode {mode})")
        conn.execute("PRAGMA synchronous = FULL")
        conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        _migrate(conn)
    except BaseException:
        conn.close()
        raise
    return conn
