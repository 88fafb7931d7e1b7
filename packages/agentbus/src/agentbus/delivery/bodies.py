"""Request bodies and query of the delivery routes (04-API-SPEC.md §5), checked into
``settle.Item`` lists: AB-8001 for a malformed body, AB-5009 past 500 items."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import Field
from starlette.datastructures import QueryParams

from agentbus.delivery.domain import (
    DEFAULT_WAIT_S,
    MAX_BATCH,
    MAX_BYTES,
    MAX_NAK_DELAY_MS,
    MAX_SETTLE_ITEMS,
    MAX_WAIT_S,
)
from agentbus.delivery.service import DeliveryService
from agentbus.delivery.settle import Item, check
from agentbus.errors import RequestInvalid
from agentbus.gateway.api.bodies import Body
from agentbus.gateway.api.principals import AgentPrincipal
from agentbus.gateway.domain.errors import BatchTooLarge

BODY_MAX = 1024 * 1024


class AckItem(Body):
    msg_id: str
    ack_token: str = Field(max_length=512)


class NakItem(AckItem):
    delay_ms: int | None = Field(None, ge=0, le=MAX_NAK_DELAY_MS)
    reason: str | None = Field(None, max_length=200)


class TermItem(AckItem):
    reason: Literal["signature_invalid", "envelope_invalid", "schema_unknown"]


class ReadItem(Body):
    msg_id: str
    read_at: str | None = None
    outcome: Literal["read", "expired"] = "read"


class Acks(Body):
    acks: list[AckItem]


class Naks(Body):
    naks: list[NakItem]


class Terms(Body):
    terms: list[TermItem]


class Reads(Body):
    reads: list[ReadItem]


def check_size(items: list[Any]) -> None:
    if len(items) > MAX_SETTLE_ITEMS:
        raise BatchTooLarge(f"at most {MAX_SETTLE_ITEMS} items per batch", limit=MAX_SETTLE_ITEMS)


def parse_read_at(value: str | None) -> datetime | None:
    """Not signed, so any RFC 3339 offset and precision is accepted and normalised to UTC."""
    if value is None:
        return None
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise RequestInvalid("read_at is not a timestamp", field="read_at") from None
    if moment.tzinfo is None:
        raise RequestInvalid("read_at needs a time zone", field="read_at")
    return moment.astimezone(UTC)


def read_items(body: Reads) -> list[Item]:
    check_size(body.reads)
    return [
        Item(r.msg_id, None, read_at=parse_read_at(r.read_at), outcome=r.outcome)
        for r in body.reads
    ]


def _int(params: QueryParams, name: str, default: int, low: int, high: int) -> int:
    raw = params.get(name)
    if raw is None:
        return default
    if not raw.isdigit() or not low <= int(raw) <= high:
        raise RequestInvalid(f"{name} must be an integer from {low} to {high}", field=name)
    return int(raw)


def poll_params(params: QueryParams) -> tuple[int, int, int]:
    """``wait_s`` (0-30, default 25), ``max`` (1-100) and ``max_bytes`` (1 B - 4 MiB)."""
    return (
        _int(params, "wait_s", DEFAULT_WAIT_S, 0, MAX_WAIT_S),
        _int(params, "max", MAX_BATCH, 1, MAX_BATCH),
        _int(params, "max_bytes", MAX_BYTES, 1, MAX_BYTES),
    )


def extra(item: Any) -> dict[str, Any]:
    """The item fields beside id and token, as ``settle.Item`` takes them."""
    if isinstance(item, NakItem):
        return {"delay_ms": item.delay_ms, "reason": item.reason}
    if isinstance(item, TermItem):
        return {"reason": item.reason}
    return {}


def checked_items(svc: DeliveryService, who: AgentPrincipal, raw: list[AckItem]) -> list[Item]:
    """Ack, nak or term items with their ids parsed and tokens verified (AB-5009 past 500)."""
    check_size(raw)
    return [check(svc, who, Item(i.msg_id, None, **extra(i)), i.ack_token) for i in raw]


def dump(doc: Any) -> bytes:
    return json.dumps(doc).encode()
