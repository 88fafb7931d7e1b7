"""Deliveries and settle results as the API shows them (04-API-SPEC.md §5)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from agentbus.delivery.domain import ACK_WAIT_S
from agentbus.gateway.api.views import sender_key_view
from agentbus.gateway.domain.wire import format_ts
from agentbus.ids import format_id

Row = dict[str, Any]


def delivery_view(
    row: Row,
    attempt: int,
    stream_seq: int,
    token: str,
    envelope: dict[str, Any],
    keys: dict[uuid.UUID, Row],
) -> dict[str, Any]:
    return {
        "msg_id": format_id("msg", row["id"]),
        "stream_seq": stream_seq,
        "attempt": attempt,
        "ack_token": token,
        "ack_deadline": format_ts(datetime.now(UTC) + timedelta(seconds=ACK_WAIT_S)),
        "sender_key": sender_key_view(keys.get(row["signing_key_id"])),
        "envelope": envelope,
    }


def result(msg_id: str, outcome: str, status: str | None = None) -> dict[str, Any]:
    """One per-item result of ack, nak, term or read: ok, already_acked, terminal, invalid."""
    item: dict[str, Any] = {"msg_id": msg_id, "result": outcome}
    if status is not None:
        item["status"] = status
    return item
