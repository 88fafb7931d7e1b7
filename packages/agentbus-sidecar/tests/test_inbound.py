"""Deliveries into the inbox: shape checks, signature verification, refusals (05 §4 step 5)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from typing import Any

from agentbus_sidecar.clock import utcnow
from agentbus_sidecar.inbound import REFUSED, accept_deliveries
from agentbus_sidecar.keys import generate_key, public_key_b64url
from agentbus_sidecar.store import outbox

ME = "agent://acme/platform/planner"
DeliveryFactory = Callable[..., dict[str, Any]]


def _term_reason(db: sqlite3.Connection, msg_id: str) -> str:
    row = outbox.get(db, f"ack:{msg_id}:term")
    assert row is not None
    body: dict[str, str] = json.loads(bytes(row["body"]))
    return body["reason"]


def test_verified_deliveries_are_stored_in_order(
    db: sqlite3.Connection, make_delivery: DeliveryFactory
) -> None:
    batch = [make_delivery(seq=n) for n in (1, 2, 3)]
    outcomes = accept_deliveries(db, batch, ME, utcnow())
    assert outcomes == [(d["msg_id"], "stored") for d in batch]
    again = accept_deliveries(db, batch[:1], ME, utcnow())
    assert again == [(batch[0]["msg_id"], "duplicate")]


def test_a_tampered_envelope_is_refused_with_term(
    db: sqlite3.Connection, make_delivery: DeliveryFactory
) -> None:
    raw = make_delivery()
    raw["envelope"]["data"]["text"] = "forged"
    assert accept_deliveries(db, [raw], ME, utcnow()) == [(raw["msg_id"], REFUSED)]
    assert _term_reason(db, raw["msg_id"]) == "signature_invalid"
    assert db.execute("SELECT count(*) FROM inbox").fetchone()[0] == 0
    assert db.execute("SELECT count(*) FROM seen_msg_ids").fetchone()[0] == 0


def test_a_key_that_is_not_the_signers_is_refused(
    db: sqlite3.Connection, make_delivery: DeliveryFactory
) -> None:
    impostor = make_delivery()
    impostor["sender_key"]["public_key"] = public_key_b64url(generate_key())
    wrong_id = make_delivery()
    wrong_id["sender_key"]["id"] = "key_" + "0" * 32
    accept_deliveries(db, [impostor, wrong_id], ME, utcnow())
    assert _term_reason(db, impostor["msg_id"]) == "signature_invalid"
    assert _term_reason(db, wrong_id["msg_id"]) == "signature_invalid"


def test_malformed_envelopes_are_refused(
    db: sqlite3.Connection, make_delivery: DeliveryFactory
) -> None:
    not_mine = make_delivery(to="agent://acme/platform/someone")
    mismatched = make_delivery()
    mismatched["msg_id"] = make_delivery()["msg_id"]
    missing = make_delivery()
    del missing["envelope"]["traceparent"]
    accept_deliveries(db, [not_mine, mismatched, missing], ME, utcnow())
    for raw in (not_mine, mismatched, missing):
        assert _term_reason(db, raw["msg_id"]) == "envelope_invalid"


def test_deliveries_without_id_or_token_are_skipped(
    db: sqlite3.Connection, make_delivery: DeliveryFactory
) -> None:
    no_token = make_delivery()
    del no_token["ack_token"]
    assert accept_deliveries(db, [no_token, {"msg_id": "junk"}, "x"], ME, utcnow()) == []  # type: ignore[list-item]
    assert outbox.rows(db) == []
