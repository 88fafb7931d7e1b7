"""Crash safety: a writer process is SIGKILLed mid-stream, the store is reopened, and nothing
it had acknowledged is lost or duplicated.

A writer "acknowledges" an id by printing it only after the commit returned, which is exactly
when the sidecar would send the transport ack (or tell the agent its send is queued).
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from agentbus_sidecar.clock import utcnow
from agentbus_sidecar.store import inbox, open_store, outbox
from agentbus_sidecar.store.inbox import Delivery, Outcome

WRITER = r"""
import sys, time
from pathlib import Path
from agentbus_sidecar.clock import utcnow
from agentbus_sidecar.ids import new_id
from agentbus_sidecar.store import inbox, open_store, outbox, transaction
from agentbus_sidecar.store.inbox import Delivery

mode, path, start = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3])
conn = open_store(path)
if mode == "hold":
    with transaction(conn):
        conn.execute(
            "INSERT INTO outbox (id, kind, body, created_at, next_attempt_at) "
            "VALUES ('uncommitted', 'send', x'7b7d', 'x', 'x')"
        )
        print("inside", flush=True)
        time.sleep(60)
seq = start
while True:
    seq += 1
    msg_id = new_id("msg")
    envelope = {
        "id": msg_id, "type": "agentbus.message.v1", "conversation": "cnv_c",
        "source": "agent://acme/platform/reviewer",
        "traceparent": "00-" + "a" * 32 + "-" + "b" * 16 + "-01",
        "data": {"seq": seq, "pad": "x" * 1500},
    }
    if mode == "inbox":
        delivery = Delivery(msg_id, seq, 1, f"token-{seq}", envelope)
        inbox.store_delivery(conn, delivery, utcnow(), unread_cap=None)
    else:
        outbox.enqueue_send(conn, envelope, utcnow())
    print(msg_id, seq, flush=True)
"""


def _run_and_kill(script: Path, mode: str, db: Path, start: int, after: int) -> list[str]:
    """Start a writer, SIGKILL it after ``after`` acknowledgements; return what it acked."""
    proc = subprocess.Popen(
        [sys.executable, str(script), mode, str(db), str(start)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    lines: list[str] = []
    for line in proc.stdout:
        lines.append(line)
        if len(lines) >= after:
            break
    os.kill(proc.pid, signal.SIGKILL)
    lines.extend(proc.stdout.readlines())  # printed before the kill: also acknowledged
    proc.stdout.close()
    assert proc.wait() == -signal.SIGKILL
    return [line.split()[0] for line in lines if line.strip()]


@pytest.fixture
def writer(tmp_path: Path) -> Path:
    script = tmp_path / "writer.py"
    script.write_text(WRITER)
    return script


def _check_integrity(conn: sqlite3.Connection) -> None:
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


def test_inbox_custody_survives_sigkill(writer: Path, tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    acked: list[str] = []
    for round_no, after in enumerate((120, 37, 80)):
        acked += _run_and_kill(writer, "inbox", db, start=round_no * 1000, after=after)
    conn = open_store(db)
    try:
        _check_integrity(conn)
        stored = {row[0] for row in conn.execute("SELECT msg_id FROM inbox")}
        assert set(acked) <= stored  # nothing acknowledged is lost
        assert len(stored) - len(acked) <= 3  # at most one committed-unprinted id per round
        seen = {row[0] for row in conn.execute("SELECT msg_id FROM seen_msg_ids")}
        acks = {row["id"] for row in outbox.rows(conn, kind="ack")}
        assert seen == stored
        assert acks == {f"ack:{m}:transport" for m in stored}

        # The gateway redelivers everything (acks lost with the process): all are duplicates.
        envelopes = {
            row["msg_id"]: (row["stream_seq"], inbox.envelope_of(row))
            for row in conn.execute("SELECT * FROM inbox")
        }
        for msg_id, (seq, envelope) in envelopes.items():
            again = Delivery(msg_id, seq, 2, "redelivered", envelope)
            assert inbox.store_delivery(conn, again, utcnow()) is Outcome.DUPLICATE
            inbox.mark_transport_acked(conn, msg_id)
        presented = [row["msg_id"] for row in inbox.present(conn, utcnow(), limit=10_000)]
        assert sorted(presented) == sorted(stored)  # each exactly once
        assert inbox.present(conn, utcnow()) == []
    finally:
        conn.close()


def test_queued_sends_survive_sigkill(writer: Path, tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    acked = _run_and_kill(writer, "outbox", db, start=0, after=150)
    conn = open_store(db)
    try:
        _check_integrity(conn)
        queued = [row["id"] for row in outbox.rows(conn, kind="send")]
        assert len(queued) == len(set(queued))
        assert set(acked) <= set(queued)
        assert len(queued) - len(acked) <= 1
    finally:
        conn.close()


def test_an_uncommitted_transaction_vanishes_and_leaves_no_lock(
    writer: Path, tmp_path: Path
) -> None:
    db = tmp_path / "state.db"
    assert _run_and_kill(writer, "hold", db, start=0, after=1) == ["inside"]
    conn = open_store(db)
    try:
        _check_integrity(conn)
        assert outbox.get(conn, "uncommitted") is None
        outbox.put(conn, "ack:m:transport", "ack", {"msg_id": "m"}, utcnow())  # writable at once
        assert outbox.get(conn, "ack:m:transport") is not None
    finally:
        conn.close()
