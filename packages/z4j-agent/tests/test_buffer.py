"""The SQLite buffer: FIFO, bounded with a dropped counter, acks, reopen, many processes."""

from __future__ import annotations

import json
import multiprocessing
import os
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from wirekit.testing import writing_new_file
from z4j_agent.buffer import EventBuffer


def _event(n: int, who: str = "t") -> dict[str, object]:
    return {"id": f"{who}-{n}", "n": n}


def test_fifo_peek_and_ack(tmp_path: Path) -> None:
    buffer = EventBuffer(tmp_path / "b.sqlite3")
    assert buffer.append([_event(i) for i in range(5)]) == 0
    rows = buffer.peek(3)
    assert [json.loads(body)["n"] for _, body in rows] == [0, 1, 2]
    assert buffer.peek(3) == rows  # peeking does not consume
    assert buffer.ack([row_id for row_id, _ in rows]) == 3
    assert [json.loads(body)["n"] for _, body in buffer.peek(10)] == [3, 4]
    assert buffer.ack([rows[0][0]]) == 0  # acking twice is harmless
    assert buffer.stats() == (2, 0)
    buffer.ack([buffer.peek(1)[0][0]], dropped=True)  # an event that could not be shipped
    assert buffer.stats() == (1, 1)


def test_bounded_drops_oldest_and_counts(tmp_path: Path) -> None:
    buffer = EventBuffer(tmp_path / "b.sqlite3", max_events=100)
    buffer.append([_event(i) for i in range(80)])
    assert buffer.append([_event(i) for i in range(80, 130)]) == 30
    assert buffer.stats() == (100, 30)
    assert json.loads(buffer.peek(1)[0][1])["n"] == 30
    buffer.append(["{}"] * 250)
    assert buffer.size == 100
    assert buffer.dropped == 280


def test_ids_are_never_reused(tmp_path: Path) -> None:
    buffer = EventBuffer(tmp_path / "b.sqlite3")
    buffer.append([_event(1)])
    first = buffer.peek(1)[0][0]
    buffer.ack([first])
    buffer.append([_event(2)])
    assert buffer.peek(1)[0][0] > first


def test_survives_reopen(tmp_path: Path) -> None:
    path = tmp_path / "b.sqlite3"
    buffer = EventBuffer(path, max_events=10)
    buffer.append([_event(i) for i in range(15)])
    buffer.ack([buffer.peek(1)[0][0]])
    buffer.close()
    again = EventBuffer(path, max_events=10)
    assert again.stats() == (9, 5)
    assert [json.loads(b)["n"] for _, b in again.peek(100)] == list(range(6, 15))
    mode = stat.S_IMODE(os.stat(path).st_mode)
    assert mode & 0o077 == 0, oct(mode)


def test_lease_admits_one_owner_until_it_expires_or_is_released(tmp_path: Path) -> None:
    buffer = EventBuffer(tmp_path / "b.sqlite3")
    assert buffer.try_lead("a", ttl=60)
    assert not buffer.try_lead("b", ttl=60)
    assert buffer.try_lead("a", ttl=60)
    buffer.release("a")
    assert buffer.try_lead("b", ttl=-1)  # taken, but already expired
    assert buffer.try_lead("a", ttl=60)


APPENDER = """
import sys
from z4j_agent.buffer import EventBuffer
path, who, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
buffer = EventBuffer(path)
for start in range(0, count, 10):
    buffer.append([{"id": f"{who}-{n}", "n": n} for n in range(start, start + 10)])
"""


def test_concurrent_processes_lose_nothing(tmp_path: Path) -> None:
    path = tmp_path / "shared.sqlite3"
    EventBuffer(path).close()  # create the schema once, as the worker's main process does
    workers = [
        subprocess.Popen([sys.executable, "-c", APPENDER, str(path), f"p{i}", "300"])
        for i in range(4)
    ]
    try:
        # Meanwhile this process ships and acks, as the leader does.
        shipped: list[str] = []
        buffer = EventBuffer(path)
        while any(w.poll() is None for w in workers) or buffer.size:
            rows = buffer.peek(50)
            shipped.extend(json.loads(body)["id"] for _, body in rows)
            buffer.ack([row_id for row_id, _ in rows])
        assert [w.wait(30) for w in workers] == [0, 0, 0, 0]
    finally:
        for worker in workers:
            worker.kill()
            worker.wait()
    assert len(shipped) == len(set(shipped)) == 1200
    assert buffer.stats() == (0, 0)
    per_process = {
        f"p{i}": [int(s.split("-")[1]) for s in shipped if s.startswith(f"p{i}-")] for i in range(4)
    }
    assert all(ns == sorted(ns) for ns in per_process.values())  # FIFO per producer


def _append_in_forked_child(buffer: EventBuffer) -> None:
    buffer.append([_event(n, "child") for n in range(20)])


@pytest.mark.skipif(sys.platform != "linux", reason="fork is the prefork pool's start method")
def test_a_forked_child_reopens_the_shared_buffer(tmp_path: Path) -> None:
    buffer = EventBuffer(tmp_path / "b.sqlite3")
    buffer.append([_event(0, "parent")])  # the parent's connection exists before the fork
    child = multiprocessing.get_context("fork").Process(
        target=_append_in_forked_child, args=(buffer,)
    )
    child.start()
    child.join(30)
    assert child.exitcode == 0
    buffer.append([_event(1, "parent")])  # and stays usable in the parent
    ids = [json.loads(body)["id"] for _, body in buffer.peek(100)]
    assert ids[0] == "parent-0"
    assert ids[-1] == "parent-1"
    assert len(ids) == 22


def test_a_new_file_another_connection_is_writing_is_waited_for(tmp_path: Path) -> None:
    """A sibling that is writing the new file when this one opens it: the switch to WAL waits
    for it rather than failing the append (SQLite answers that switch "locked" at once)."""
    path = tmp_path / "buffer.sqlite3"
    with writing_new_file(path) as release:
        threading.Timer(0.3, release.set).start()
        buf = EventBuffer(path)
        assert buf.append([_event(1)]) == 0
        assert [json.loads(body)["n"] for _id, body in buf.peek(10)] == [1]
