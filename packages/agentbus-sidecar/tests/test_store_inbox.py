"""Custody, dedupe and presentation in the inbox (05-DELIVERY-SEMANTICS.md §4, §9.3, §10.4)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from agentbus_sidecar.clock import format_ts, utcnow
from agentbus_sidecar.store import inbox, outbox
from agentbus_sidecar.store.inbox import Delivery, Outcome

DeliveryFactory = Callable[..., dict[str, Any]]


def _d(raw: dict[str, Any]) -> Delivery:
    return Delivery(raw["msg_id"], raw["stream_seq"], raw["attempt"], raw["ack_token"],
                    raw["envelope"])  # fmt: skip


def _outbox(db: sqlite3.Connection) -> dict[str, dict[str, Any]]:
    return {row["id"]: json.loads(bytes(row["body"])) for row in outbox.rows(db)}


def _store_acked(db: sqlite3.Connection, raw: dict[str, Any]) -> None:
    assert inbox.store_delivery(db, _d(raw), utcnow()) is Outcome.STORED
    inbox.mark_transport_acked(db, raw["msg_id"])


def test_custody_is_one_transaction_with_the_queued_ack(
    db: sqlite3.Connection, make_delivery: DeliveryFactory
) -> None:
    raw = make_delivery(seq=7)
    assert inbox.store_delivery(db, _d(raw), utcnow()) is Outcome.STORED
    row = inbox.get(db, raw["msg_id"])
    assert row is not None
    assert (row["stream_seq"], row["transport_acked"], row["attempt"]) == (7, 0, 1)
    assert row["trace_id"] == raw["envelope"]["traceparent"].split("-")[1]
    assert inbox.envelope_of(row) == raw["envelope"]
    assert db.execute("SELECT count(*) FROM seen_msg_ids").fetchone()[0] == 1
    ack_id = f"ack:{raw['msg_id']}:transport"
    assert _outbox(db) == {ack_id: {"msg_id": raw["msg_id"], "ack_token": "tok-7-1"}}


def test_a_failure_inside_custody_leaves_nothing(
    db: sqlite3.Connection, make_delivery: DeliveryFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*_args: object) -> None:
        raise sqlite3.OperationalError("disk I/O error")

    monkeypatch.setattr(outbox, "put", broken)
    raw = make_delivery()
    with pytest.raises(sqlite3.OperationalError):
        inbox.store_delivery(db, _d(raw), utcnow())
    for table in ("inbox", "seen_msg_ids", "outbox"):
        assert db.execute(f"SELECT count(*) FROM {table}").fetchone()[0] == 0


def test_only_transport_acked_rows_are_presented_and_only_once(
    db: sqlite3.Connection, make_delivery: DeliveryFactory
) -> None:
    raw = make_delivery()
    inbox.store_delivery(db, _d(raw), utcnow())
    assert inbox.present(db, utcnow()) == []
    inbox.mark_transport_acked(db, raw["msg_id"])
    assert ack_rows(db) == []
    assert [r["msg_id"] for r in inbox.present(db, utcnow())] == [raw["msg_id"]]
    assert inbox.present(db, utcnow()) == []
    assert [r["msg_id"] for r in inbox.list_messages(db)] == [raw["msg_id"]]


def ack_rows(db: sqlite3.Connection) -> list[str]:
    return [row["id"] for row in outbox.rows(db, kind="ack")]


def test_a_redelivery_is_acked_again_but_never_presented_again(
    db: sqlite3.Connection, make_delivery: DeliveryFactory
) -> None:
    raw = make_delivery(seq=3)
    _store_acked(db, raw)
    assert len(inbox.present(db, utcnow())) == 1
    again = {**raw, "attempt": 2, "ack_token": "fresh"}
    assert inbox.store_delivery(db, _d(again), utcnow()) is Outcome.DUPLICATE
    row = inbox.get(db, raw["msg_id"])
    assert row is not None
    assert (row["redelivery"], row["attempt"]) == (1, 2)
    assert _outbox(db)[f"ack:{raw['msg_id']}:transport"]["ack_token"] == "fresh"
    inbox.mark_transport_acked(db, raw["msg_id"])
    assert inbox.present(db, utcnow()) == []
    assert db.execute("SELECT count(*) FROM inbox").fetchone()[0] == 1


def test_a_redelivery_before_the_ack_went_out_replaces_the_token(
    db: sqlite3.Connection, make_delivery: DeliveryFactory
) -> None:
    raw = make_delivery(seq=3)
    inbox.store_delivery(db, _d(raw), utcnow())
    inbox.store_delivery(db, _d({**raw, "attempt": 2, "ack_token": "second"}), utcnow())
    assert _outbox(db) == {
        f"ack:{raw['msg_id']}:transport": {"msg_id": raw["msg_id"], "ack_token": "second"}
    }


def test_seen_ids_dedupe_after_the_inbox_row_is_gone(
    db: sqlite3.Connection, make_delivery: DeliveryFactory
) -> None:
    raw = make_delivery()
    _store_acked(db, raw)
    inbox.remove(db, raw["msg_id"])  # e.g. the gateway answered "terminal"
    assert inbox.store_delivery(db, _d(raw), utcnow()) is Outcome.DUPLICATE
    assert inbox.get(db, raw["msg_id"]) is None
    assert ack_rows(db) == [f"ack:{raw['msg_id']}:transport"]


def test_an_expired_delivery_is_acked_and_reported_not_stored(
    db: sqlite3.Connection, make_delivery: DeliveryFactory
) -> None:
    now = utcnow()
    raw = make_delivery(expires=now + timedelta(seconds=1))
    outcome = inbox.store_delivery(db, _d(raw), now + timedelta(seconds=2))
    assert outcome is Outcome.EXPIRED
    assert inbox.get(db, raw["msg_id"]) is None
    queued = _outbox(db)
    assert queued[f"ack:{raw['msg_id']}:application"]["outcome"] == "expired"
    assert f"ack:{raw['msg_id']}:transport" in queued
    assert inbox.store_delivery(db, _d(raw), now) is Outcome.DUPLICATE


def test_presentation_follows_stream_order_and_marks_late_arrivals(
    db: sqlite3.Connection, make_delivery: DeliveryFactory
) -> None:
    conversation = "cnv_" + "0" * 12 + "7" + "0" * 3 + "8" + "0" * 15
    first, second = (
        make_delivery(seq=10, conversation=conversation),
        make_delivery(seq=20, conversation=conversation),
    )
    late = make_delivery(seq=5, conversation=conversation)
    other = make_delivery(seq=1)
    for raw in (second, first, late, other):
        _store_acked(db, raw)
    order = [r["msg_id"] for r in inbox.present(db, utcnow())]
    assert order == [other["msg_id"], late["msg_id"], first["msg_id"], second["msg_id"]]
    flags = {r["msg_id"]: r["out_of_order"] for r in db.execute("SELECT * FROM inbox")}
    assert flags == {second["msg_id"]: 0, first["msg_id"]: 1, late["msg_id"]: 1,
                     other["msg_id"]: 0}  # fmt: skip


def test_a_full_inbox_naks_with_the_default_backoff(
    db: sqlite3.Connection, make_delivery: DeliveryFactory
) -> None:
    _store_acked(db, make_delivery(seq=1))
    raw = make_delivery(seq=2, attempt=3)
    assert inbox.store_delivery(db, _d(raw), utcnow(), unread_cap=1) is Outcome.DEFERRED
    nak = _outbox(db)[f"nak:{raw['msg_id']}"]
    assert nak == {"msg_id": raw["msg_id"], "ack_token": "tok-2-3", "delay_ms": 4000,
                   "reason": "inbox_full"}  # fmt: skip
    assert inbox.get(db, raw["msg_id"]) is None


def test_application_ack(db: sqlite3.Connection, make_delivery: DeliveryFactory) -> None:
    raw = make_delivery()
    inbox.store_delivery(db, _d(raw), utcnow())
    assert not inbox.mark_read(db, raw["msg_id"], utcnow())  # not in custody yet
    inbox.mark_transport_acked(db, raw["msg_id"])
    assert inbox.mark_read(db, raw["msg_id"], utcnow())
    assert not inbox.mark_read(db, raw["msg_id"], utcnow())
    assert db.execute("SELECT app_acked FROM seen_msg_ids").fetchone()[0] == 1
    read = _outbox(db)[f"ack:{raw['msg_id']}:application"]
    assert read["outcome"] == "read"
    assert read["read_at"].endswith("Z")
    assert inbox.list_messages(db) == []
    assert len(inbox.list_messages(db, include_read=True)) == 1
    assert inbox.unread_count(db) == 0


def test_unpresented_messages_expire(
    db: sqlite3.Connection, make_delivery: DeliveryFactory
) -> None:
    now = utcnow()
    raw = make_delivery(expires=now + timedelta(seconds=30))
    keep = make_delivery(expires=now + timedelta(seconds=30))
    _store_acked(db, raw)
    _store_acked(db, keep)
    inbox.present(db, now, limit=1)  # the first one is presented, so expiry no longer applies
    later = now + timedelta(minutes=1)
    assert inbox.expire_unpresented(db, later) == [keep["msg_id"]]
    assert _outbox(db)[f"ack:{keep['msg_id']}:application"]["outcome"] == "expired"
    assert inbox.present(db, later) == []
    assert format_ts(later) == inbox.get(db, keep["msg_id"])["read_at"]  # type: ignore[index]


def test_a_restored_message_is_stored_acked_and_queues_nothing(
    db: sqlite3.Connection, make_delivery: DeliveryFactory
) -> None:
    raw = make_delivery(seq=3)
    assert inbox.restore(db, _d(raw), utcnow()) is Outcome.STORED
    row = inbox.get(db, raw["msg_id"])
    assert row is not None
    assert (row["stream_seq"], row["transport_acked"]) == (3, 1)
    assert _outbox(db) == {}, "the gateway has its transport ack already"
    assert inbox.restore(db, _d(raw), utcnow()) is Outcome.DUPLICATE
    assert [r["msg_id"] for r in inbox.present(db, utcnow())] == [raw["msg_id"]]


def test_an_expired_or_already_seen_message_is_not_restored(
    db: sqlite3.Connection, make_delivery: DeliveryFactory
) -> None:
    gone = make_delivery(seq=1, expires=utcnow() + timedelta(seconds=1))
    assert inbox.restore(db, _d(gone), utcnow() + timedelta(seconds=2)) is Outcome.EXPIRED
    assert inbox.get(db, gone["msg_id"]) is None
    seen = make_delivery(seq=2)
    _store_acked(db, seen)
    inbox.mark_read(db, seen["msg_id"], utcnow())
    inbox.remove(db, seen["msg_id"])  # retention dropped the row; its id is still seen
    assert inbox.restore(db, _d(seen), utcnow()) is Outcome.DUPLICATE
    assert inbox.get(db, seen["msg_id"]) is None
