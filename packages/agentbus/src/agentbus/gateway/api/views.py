"""JSON shapes of the gateway's resources (04-API-SPEC): rows in, API objects out."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from agentbus.gateway.domain.wire import b64url_encode, format_ts
from agentbus.ids import format_id

Row = dict[str, Any]


def ts(value: datetime | None) -> str | None:
    return None if value is None else format_ts(value)


def agent_view(row: Row) -> dict[str, Any]:
    return {
        "id": format_id("agt", row["id"]),
        "address": row["address"],
        "workspace_id": format_id("ws", row["workspace_id"]),
        "owner_user_id": format_id("usr", row["owner_user_id"]),
        "name": row["name"],
        "display_name": row["display_name"],
        "description": row["description"],
        "capabilities": row["capabilities"],
        "harness": row["harness"],
        "harness_version": row["harness_version"],
        "mode": row["mode"],
        "visibility": row["visibility"],
        "status": row["status"],
        "delivery": row["delivery"],
        "created_at": ts(row["created_at"]),
    }


def key_view(row: Row) -> dict[str, Any]:
    return {
        "id": format_id("key", row["id"]),
        "fingerprint": row["fingerprint"],
        "spiffe_id": row["spiffe_id"],
        "expires_at": ts(row["expires_at"]),
    }


def sender_key_view(key: Row | None) -> dict[str, Any] | None:
    """The key an envelope was signed with, beside it so its reader can verify it (04 §5.1)."""
    if key is None:
        return None
    return {
        "id": format_id("key", key["id"]),
        "public_key": b64url_encode(bytes(key["public_key"])),
        "expires_at": ts(key["expires_at"]),
    }


def conversation_view(row: Row, participants: list[str]) -> dict[str, Any]:
    return {
        "id": format_id("cnv", row["id"]),
        "workspace_id": format_id("ws", row["workspace_id"]),
        "started_by": format_id("agt", row["started_by"]),
        "title": row["title"],
        "participants": participants,
        "message_count": row["message_count"],
        "last_message_at": ts(row["last_message_at"]),
        "created_at": ts(row["created_at"]),
    }


def message_view(row: Row) -> dict[str, Any]:
    """Message metadata (04-API-SPEC §4.3), never the payload."""
    return {
        "id": format_id("msg", row["id"]),
        "type": row["type"],
        "from": row["from_address"],
        "to": row["to_address"],
        "conversation": format_id("cnv", row["conversation_id"]),
        "correlation": None
        if row["correlation_id"] is None
        else format_id("msg", row["correlation_id"]),
        "status": row["status"],
        "stream_seq": row["stream_seq"],
        "attempts": row["attempts"],
        "priority": row["priority"],
        "expires_at": ts(row["expires_at"]),
        "accepted_at": ts(row["accepted_at"]),
        "delivered_at": ts(row["delivered_at"]),
        "read_at": ts(row["read_at"]),
        "trace_id": row["trace_id"],
        "payload_bytes": row["payload_bytes"],
    }
