"""One usage record of ``POST /v1/usage`` (04-API-SPEC §9): its shape, and the checks that refuse
it alone (AB-8001 naming the field), before anything is written."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any, Literal

from platformkit.storable import find_unstorable
from pydantic import Field, ValidationError

from agentbus.errors import RequestInvalid
from agentbus.gateway.api.bodies import Body
from agentbus.gateway.domain.wire import parse_ts
from agentbus.ids import InvalidId, parse_id

BIGINT = 2**63 - 1
INT = 2**31 - 1
DETAILS_MAX = 4096  # characters of compact JSON
FUTURE_SKEW = timedelta(minutes=5)
_ID = r"^usg_[0-9a-f]{32}$"
_DECIMAL = r"^(0|[1-9][0-9]{0,7})(\.[0-9]{1,6})?$"  # numeric(14, 6)


class Record(Body):
    id: str = Field(pattern=_ID)
    recorded_at: str = Field(max_length=30)
    task_id: str | None = Field(default=None, max_length=40)
    message_id: str | None = Field(default=None, max_length=40)
    conversation_id: str | None = Field(default=None, max_length=40)
    harness: Literal["claude", "codex", "opencode", "gemini", "custom"] = "custom"
    provider: Literal["anthropic", "openai", "google", "other"]
    model: str = Field(min_length=1, max_length=100)
    input_tokens: int = Field(default=0, ge=0, le=BIGINT)
    output_tokens: int = Field(default=0, ge=0, le=BIGINT)
    cache_read_tokens: int = Field(default=0, ge=0, le=BIGINT)
    cache_write_tokens: int = Field(default=0, ge=0, le=BIGINT)
    reasoning_tokens: int = Field(default=0, ge=0, le=BIGINT)
    cost_usd: str | None = Field(default=None, pattern=_DECIMAL)
    cost_source: Literal["computed", "harness_reported", "estimate"] | None = None
    reported_by: Literal["harness", "proxy", "agent", "estimate"] = "harness"
    confidence: Literal["exact", "approximate", "unverified"] = "exact"
    bus_bytes_in: int = Field(default=0, ge=0, le=BIGINT)
    bus_bytes_out: int = Field(default=0, ge=0, le=BIGINT)
    bus_messages: int = Field(default=0, ge=0, le=INT)
    duration_ms: int | None = Field(default=None, ge=0, le=BIGINT)
    details: dict[str, Any] | None = None


class Checked(Record):
    """A record that passed every check, with its ids parsed."""

    usage_id: uuid.UUID
    at: datetime
    task: uuid.UUID | None
    message: uuid.UUID | None
    conversation: uuid.UUID | None
    cost: Decimal | None


def _invalid(field: str, reason: str) -> RequestInvalid:
    errors = [{"field": field, "reason": reason}]
    return RequestInvalid(f"{field}: {reason}", field=field, errors=errors)


def _id(prefix: str, value: str | None, field: str) -> uuid.UUID | None:
    if value is None:
        return None
    try:
        return parse_id(prefix, value)
    except InvalidId:
        raise _invalid(field, f"not a {prefix}_ id") from None


def check_record(item: Any, now: datetime | None = None) -> Checked:
    """``item`` as a checked record, or the AB-8001 refusing it alone."""
    if not isinstance(item, dict):
        raise _invalid("/", "a record is a JSON object")
    unstorable = find_unstorable(item)
    if unstorable is not None:
        raise _invalid(unstorable.path, unstorable.reason)
    try:
        record = Record.model_validate(item)
    except ValidationError as exc:
        errors = [{"field": "/" + "/".join(map(str, e["loc"])), "reason": e["msg"]}
                  for e in exc.errors()]  # fmt: skip
        raise RequestInvalid(f"{len(errors)} invalid field(s)", field=errors[0]["field"],
                             errors=errors) from None  # fmt: skip
    try:
        at = parse_ts(record.recorded_at)
    except ValueError as exc:
        raise _invalid("/recorded_at", str(exc)) from None
    if at > (now or datetime.now(UTC)) + FUTURE_SKEW:
        raise _invalid("/recorded_at", "in the future")
    compact = json.dumps(record.details, separators=(",", ":"))
    if len(compact) > DETAILS_MAX:
        raise _invalid("/details", f"over {DETAILS_MAX} bytes")
    return Checked(
        **record.model_dump(),
        usage_id=parse_id("usg", record.id),
        at=at,
        task=_id("tsk", record.task_id, "/task_id"),
        message=_id("msg", record.message_id, "/message_id"),
        conversation=_id("cnv", record.conversation_id, "/conversation_id"),
        cost=None if record.cost_usd is None else Decimal(record.cost_usd),
    )
