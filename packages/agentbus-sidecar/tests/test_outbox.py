"""Outbox rows, retry schedule with backoff and jitter, parking (05 §3 step 8)."""

from __future__ import annotations

import random
import sqlite3
from datetime import timedelta

import pytest
from agentbus_sidecar.backoff import nak_delay_ms, reconnect_delay_s, retry_delay_s
from agentbus_sidecar.clock import format_ts, parse_ts, utcnow
from agentbus_sidecar.store import outbox
from wirekit.canonical import canonical_json


def _env(msg_id: str) -> dict[str, object]:
    return {"id": msg_id, "recipient": "agent://acme/platform/reviewer", "data": {"x": 1}}


def test_a_send_stores_the_exact_bytes_it_will_resend(db: sqlite3.Connection) -> None:
    envelope = _env("msg_1")
    outbox.enqueue_send(db, envelope, utcnow())
    row = outbox.get(db, "msg_1")
    assert row is not None
    assert bytes(row["body"]) == canonical_json(envelope)
    assert (row["kind"], row["attempts"], row["last_error"]) == ("send", 0, None)
    assert outbox.queued_envelope(db, "msg_1") == envelope
    with pytest.raises(sqlite3.IntegrityError):
        outbox.enqueue_send(db, envelope, utcnow())


def test_due_rows_respect_the_schedule(db: sqlite3.Connection) -> None:
    now = utcnow()
    outbox.enqueue_send(db, _env("msg_1"), now)
    outbox.put(db, "ack:msg_9:transport", "ack", {"msg_id": "msg_9"}, now)
    assert [r["id"] for r in outbox.due(db, now, ("send",))] == ["msg_1"]
    assert [r["id"] for r in outbox.due(db, now, ("ack", "nak"))] == ["ack:msg_9:transport"]
    next_at = outbox.record_failure(db, "msg_1", now, "boom", rng=random.Random(1))
    assert next_at is not None
    assert next_at > now
    assert outbox.due(db, now, ("send",)) == []
    assert [r["id"] for r in outbox.due(db, next_at, ("send",))] == ["msg_1"]
    assert outbox.record_failure(db, "missing", now, "boom") is None


def test_failures_back_off_exponentially_up_to_five_minutes(db: sqlite3.Connection) -> None:
    now = utcnow()
    outbox.enqueue_send(db, _env("msg_1"), now)
    rng = random.Random(7)
    delays = []
    for attempt in range(1, 14):
        next_at = outbox.record_failure(db, "msg_1", now, f"try {attempt}", rng=rng)
        assert next_at is not None
        delays.append((next_at - now).total_seconds())
        window = min(2 ** (attempt - 1), 300)
        assert window / 2 <= delays[-1] <= window + 0.001
    row = outbox.get(db, "msg_1")
    assert row is not None
    assert row["attempts"] == 13
    assert row["last_error"] == "try 13"
    assert delays[-1] >= 150


def test_retry_after_is_a_floor() -> None:
    assert retry_delay_s(1, retry_after_s=42.0, rng=random.Random(0)) == 42.0
    assert retry_delay_s(12, retry_after_s=1.0, rng=random.Random(0)) >= 150


def test_jitter_spreads_retries() -> None:
    rng = random.Random(3)
    samples = {round(retry_delay_s(6, rng=rng), 3) for _ in range(50)}
    assert len(samples) > 40
    assert all(16 <= s <= 32 for s in samples)


def test_reconnect_and_nak_delays() -> None:
    assert all(reconnect_delay_s(n, rng=random.Random(n)) <= 30 for n in range(1, 20))
    assert [nak_delay_ms(a) for a in (1, 2, 3, 9, 10, 30)] == [
        1000, 2000, 4000, 256000, 300000, 300000,
    ]  # fmt: skip


def test_a_parked_send_is_never_due_but_stays_visible(db: sqlite3.Connection) -> None:
    now = utcnow()
    outbox.enqueue_send(db, _env("msg_1"), now)
    outbox.park(db, "msg_1", "AB-3002 recipient_not_found: no such agent")
    far = parse_ts("9999-01-01T00:00:00.000Z")
    assert outbox.due(db, far, ("send",)) == []
    assert outbox.pending_sends(db) == []
    row = outbox.get(db, "msg_1")
    assert row is not None
    assert row["next_attempt_at"] == outbox.PARKED
    assert row["last_error"].startswith("AB-3002")
    outbox.delete(db, "msg_1")
    assert outbox.rows(db) == []


def test_put_replaces_the_body_and_makes_the_row_due(db: sqlite3.Connection) -> None:
    now = utcnow()
    outbox.put(db, "ack:m:transport", "ack", {"ack_token": "old"}, now)
    outbox.record_failure(db, "ack:m:transport", now, "down", rng=random.Random(0))
    later = now + timedelta(milliseconds=1)
    outbox.put(db, "ack:m:transport", "ack", {"ack_token": "new"}, later)
    row = outbox.get(db, "ack:m:transport")
    assert row is not None
    assert bytes(row["body"]) == b'{"ack_token":"new"}'
    assert row["next_attempt_at"] == format_ts(later)
    assert row["attempts"] == 1
