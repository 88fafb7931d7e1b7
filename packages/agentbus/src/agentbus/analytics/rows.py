"""Outbox rows to ClickHouse rows: pure functions, property-tested.

The outbox holds each row as PostgreSQL's JSON of it (``analytics_outbox.row``); ClickHouse
wants ``details`` as a JSON string (a ``String`` column), and ``usage`` rows carry PostgreSQL's
numeric ``cost_usd`` as a JSON number, which ClickHouse reads into ``Decimal(14, 6)`` only as
text without loss."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import orjson

__all__ = [
    "EVENT_COLUMNS", "USAGE_COLUMNS", "Batch", "event_row", "parse_row", "split", "usage_row",
]  # fmt: skip

Row = dict[str, Any]

EVENT_COLUMNS = (
    "event_id", "event_time", "event", "tenant_id", "workspace_id", "message_id",
    "conversation_id", "task_id", "trace_id", "span_id", "from_agent_id", "to_agent_id", "type",
    "capability", "attempt", "actor", "payload_bytes", "latency_ms", "error_code", "policy_id",
    "bridged_from", "details",
)  # fmt: skip
USAGE_COLUMNS = (
    "usage_id", "recorded_at", "tenant_id", "workspace_id", "agent_id", "task_id", "message_id",
    "conversation_id", "harness", "provider", "model", "input_tokens", "output_tokens",
    "cache_read_tokens", "cache_write_tokens", "reasoning_tokens", "cost_usd", "cost_source",
    "reported_by", "confidence", "bus_bytes_in", "bus_bytes_out", "bus_messages", "duration_ms",
    "details",
)  # fmt: skip


def _details(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value if value is not None else {}, separators=(",", ":"), sort_keys=True)


def event_row(raw: Mapping[str, Any]) -> Row:
    """An ``events`` row in the DDL's column order; unknown keys are dropped."""
    row = {name: raw.get(name) for name in EVENT_COLUMNS}
    row["details"] = _details(raw.get("details"))
    row["trace_id"] = row["trace_id"] or ""
    row["span_id"] = row["span_id"] or ""
    return row


def usage_row(raw: Mapping[str, Any]) -> Row:
    """A ``usage`` row; ``cost_usd`` as exact decimal text with six places."""
    row = {name: raw.get(name) for name in USAGE_COLUMNS}
    row["cost_usd"] = str(Decimal(str(raw.get("cost_usd", 0))).quantize(Decimal("0.000001")))
    row["details"] = _details(raw.get("details"))
    return row


@dataclass
class Batch:
    """One tenant's outbox rows split by target; ``last_seq`` is the highest taken."""

    events: list[Row] = field(default_factory=list)
    usage: list[Row] = field(default_factory=list)
    last_seq: int = 0


def parse_row(text: str) -> Row:
    """An outbox row's JSON text: by orjson, or by the standard parser where orjson refuses (an
    integer beyond 64 bits inside a usage record's details)."""
    try:
        parsed: Row = orjson.loads(text)
    except orjson.JSONDecodeError:
        parsed = json.loads(text)
    return parsed


def split(rows: Iterable[Mapping[str, Any]]) -> Batch:
    """Outbox rows (``seq``, ``target``, ``row`` as JSON text) to ClickHouse rows, one per id: an
    event or usage record queued twice (a retried statement) goes in once."""
    batch = Batch()
    seen: set[str] = set()
    for item in rows:
        batch.last_seq = max(batch.last_seq, int(item["seq"]))
        raw = parse_row(item["row"])
        if item["target"] == "events":
            key = str(raw["event_id"])
            if key not in seen:
                seen.add(key)
                batch.events.append(event_row(raw))
        else:
            key = "u" + str(raw["usage_id"])
            if key not in seen:
                seen.add(key)
                batch.usage.append(usage_row(raw))
    return batch
