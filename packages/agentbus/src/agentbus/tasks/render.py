"""Tasks and transitions as the API shows them (04-API-SPEC.md §6.2): text ids, addresses,
timestamps in the wire form of conventions §7, money as decimal strings."""

from __future__ import annotations

import uuid
from datetime import datetime
from decimal import Decimal
from typing import Any

from agentbus.gateway.domain.wire import format_ts
from agentbus.ids import format_id

Row = dict[str, Any]


def _time(value: datetime | None) -> str | None:
    return None if value is None else format_ts(value)


def _id(prefix: str, value: uuid.UUID | None) -> str | None:
    return None if value is None else format_id(prefix, value)


def _money(value: Decimal) -> str:
    return f"{value:.6f}"


def task_view(row: Row, addresses: dict[Any, str]) -> dict[str, Any]:
    return {
        "id": format_id("tsk", row["id"]),
        "conversation": format_id("cnv", row["conversation_id"]),
        "request_msg_id": format_id("msg", row["request_msg_id"]),
        "requester": addresses.get(row["requester_agent_id"]),
        "recipient": addresses.get(row["recipient_agent_id"]),
        "idempotency_key": row["idempotency_key"],
        "capability": row["capability"],
        "capability_ver": row["capability_ver"],
        "state": row["state"],
        "budget": row["budget"],
        "spent": _money(row["spent"]),
        "progress": row["progress"],
        "result_msg_id": _id("msg", row["result_msg_id"]),
        "error_code": row["error_code"],
        "submitted_at": _time(row["submitted_at"]),
        "delivered_at": _time(row["delivered_at"]),
        "accepted_at": _time(row["accepted_at"]),
        "started_at": _time(row["started_at"]),
        "finished_at": _time(row["finished_at"]),
        "expires_at": _time(row["expires_at"]),
        "duration_ms": row["duration_ms"],
    }


def transition_view(row: Row) -> dict[str, Any]:
    return {
        "id": format_id("trn", row["id"]),
        "from_state": row["from_state"],
        "to_state": row["to_state"],
        "by_msg_id": _id("msg", row["by_msg_id"]),
        "reason": row["reason"],
        "at": _time(row["at"]),
    }
