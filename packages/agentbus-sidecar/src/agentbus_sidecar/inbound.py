"""Deliveries from the gateway into the inbox (05-DELIVERY-SEMANTICS.md §4 step 5).

Per delivery: check the envelope's shape, verify the sender's signature with the key the
gateway delivered alongside it, then take custody in one SQLite transaction (inbox row,
``seen_msg_ids``, queued transport ack). What can never be accepted is refused with a queued
``term`` (``envelope_invalid`` or ``signature_invalid``). Nothing here talks to the network: the
queued acks are sent by ``outbound.flush_settlements`` after the commit.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from agentbus_sidecar.envelope import verify_envelope
from agentbus_sidecar.errors import SignatureInvalid
from agentbus_sidecar.ids import parse_id
from agentbus_sidecar.keys import public_key_from_b64url
from agentbus_sidecar.store import inbox, outbox

__all__ = ["REFUSED", "accept_deliveries", "refusal_reason"]

REFUSED = "refused"
_REQUIRED = (
    "specversion",
    "id",
    "source",
    "type",
    "time",
    "datacontenttype",
    "dataschema",
    "recipient",
    "conversation",
    "priority",
    "traceparent",
    "keyid",
    "signature",
    "data",
)


def refusal_reason(raw: dict[str, Any], own_address: str) -> str | None:
    """Why a delivery can never be accepted (a ``term`` reason), or None if it is acceptable."""
    envelope = raw.get("envelope")
    if not isinstance(envelope, dict) or envelope.get("id") != raw.get("msg_id"):
        return "envelope_invalid"
    if envelope.get("specversion") != "1.0" or any(k not in envelope for k in _REQUIRED):
        return "envelope_invalid"
    if envelope["recipient"] != own_address or not isinstance(envelope["data"], dict):
        return "envelope_invalid"
    if str(envelope["traceparent"]).count("-") != 3:
        return "envelope_invalid"
    sender_key = raw.get("sender_key")
    if not isinstance(sender_key, dict) or sender_key.get("id") != envelope["keyid"]:
        return "signature_invalid"
    try:
        verify_envelope(envelope, public_key_from_b64url(str(sender_key.get("public_key"))))
    except (SignatureInvalid, ValueError):
        return "signature_invalid"
    return None


def _delivery(raw: dict[str, Any]) -> inbox.Delivery | None:
    try:
        msg_id = str(raw["msg_id"])
        parse_id(msg_id, "msg")
        return inbox.Delivery(
            msg_id=msg_id,
            stream_seq=int(raw["stream_seq"]),
            attempt=int(raw.get("attempt", 1)),
            ack_token=str(raw["ack_token"]),
            envelope=envelope if isinstance(envelope := raw.get("envelope"), dict) else {},
        )
    except (KeyError, TypeError, ValueError):
        return None


def accept_deliveries(
    conn: sqlite3.Connection,
    deliveries: Iterable[dict[str, Any]],
    own_address: str,
    now: datetime,
    *,
    unread_cap: int | None = inbox.DEFAULT_UNREAD_CAP,
) -> list[tuple[str, str]]:
    """Store what can be stored; returns ``(msg_id, outcome)`` per recognisable delivery."""
    outcomes: list[tuple[str, str]] = []
    for raw in deliveries:
        delivery = _delivery(raw) if isinstance(raw, dict) else None
        if delivery is None:
            # Without an id and token there is nothing to ack or refuse; AckWait redelivers it
            # and MaxDeliver eventually dead-letters it on the gateway's side.
            continue
        reason = refusal_reason(raw, own_address)
        if reason is not None:
            body = {"msg_id": delivery.msg_id, "ack_token": delivery.ack_token, "reason": reason}
            outbox.put(conn, outbox.ack_id(delivery.msg_id, outbox.TERM), "ack", body, now)
            outcomes.append((delivery.msg_id, REFUSED))
            continue
        outcome = inbox.store_delivery(conn, delivery, now, unread_cap=unread_cap)
        outcomes.append((delivery.msg_id, outcome.value))
    return outcomes
