"""WAL for a new SQLite file that another connection is writing: waited for, within a limit."""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path

import pytest
from wirekit.sqlitewal import use_wal
from wirekit.testing import writing_new_file


def test_the_switch_waits_for_the_other_writer(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    with writing_new_file(path) as release:
        threading.Timer(0.3, release.set).start()
        conn = sqlite3.connect(path, isolation_level=None)
        try:
            assert use_wal(conn, timeout_s=30) == "wal"
        finally:
            conn.close()


def test_the_switch_gives_up_when_its_time_is_spent(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    with writing_new_file(path):
        conn = sqlite3.connect(path, isolation_level=None)
        started = time.monotonic()
        try:
            with pytest.raises(sqlite3.OperationalError, match="locked"):
                use_wal(conn, timeout_s=0.3)
        finally:
            conn.close()
        assert time.monotonic() - started >= 0.1  # it did try again before giving up


def test_a_file_already_in_wal_needs_no_wait(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    first = sqlite3.connect(path, isolation_level=None)
    assert use_wal(first, timeout_s=1) == "wal"
    first.close()
    with writing_new_file(path):
        conn = sqlite3.connect(path, isolation_level=None)
        try:
            assert use_wal(conn, timeout_s=0) == "wal"
        finally:
            conn.close()
