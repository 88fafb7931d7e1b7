"""Helpers for the tests of packages built on wirekit."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = ["writing_new_file"]


@contextmanager
def writing_new_file(path: Path) -> Iterator[threading.Event]:
    """Another connection in a write transaction on ``path`` (a new SQLite file, which it
    creates) until the event yielded is set, or the block ends."""
    started, release = threading.Event(), threading.Event()

    def hold() -> None:
        conn = sqlite3.connect(path, isolation_level=None)
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("CREATE TABLE other_writer (x)")
        started.set()
        release.wait(60)
        conn.execute("COMMIT")
        conn.close()

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        if not started.wait(60):
            raise RuntimeError("the other connection did not start writing")
        yield release
    finally:
        release.set()
        holder.join()
