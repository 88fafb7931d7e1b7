"""The event record the agent buffers and ships, built in one place so every kind has one shape.

An event is ``{id, engine, kind, task_id, occurred_at, data}``. ``id`` is a UUIDv7 made once
when the event happens: the brain uses it as the idempotency key, so a batch resent after a lost
ack is counted once. ``data`` of a task event always has the standard fields below (null when
unknown) plus kind-specific extras; it is redacted here, before it touches the disk.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from z4j_agent.protocol import LONE_SURROGATE
from z4j_agent.redaction import RedactionLimits, redact, redact_text, redacted_json_flags

TASK_KINDS = frozenset(
    {
        "task.sent",
        "task.received",
        "task.started",
        "task.succeeded",
        "task.failed",
        "task.retried",
        "task.revoked",
        "task.rejected",
    }
)
WORKER_KINDS = frozenset({"worker.online", "worker.offline", "worker.heartbeat"})
EVENT_KINDS = TASK_KINDS | WORKER_KINDS

TASK_FIELDS = (
    "task_name",
    "queue",
    "args",
    "kwargs",
    "result",
    "exception",
    "traceback",
    "worker",
    "retry_count",
    "runtime_ms",
    "parent_id",
    "root_id",
    "group_id",
    "eta",
    "expires",
)
MAX_TRACEBACK = 64 * 1024
MAX_EVENT_BYTES = 256 * 1024
BULKY_FIELDS = ("args", "kwargs", "result")
EVENT_LIMITS = RedactionLimits()


def new_event_id() -> str:
    """A UUIDv7: time-ordered, so the brain's index on event ids stays append-mostly."""
    millis = time.time_ns() // 1_000_000
    rand = int.from_bytes(os.urandom(10), "big")
    value = (millis & (2**48 - 1)) << 80 | 0x7 << 76 | (rand >> 68) << 64 | 0b10 << 62
    value |= rand & (2**62 - 1)
    return str(uuid.UUID(int=value))


def utc_iso(moment: datetime | None = None) -> str:
    """ISO 8601 in UTC with microseconds, e.g. ``2025-01-31T12:00:00.000001Z``."""
    moment = (moment or datetime.now(UTC)).astimezone(UTC)
    return moment.isoformat(timespec="microseconds").replace("+00:00", "Z")


def redact_event_data(data: Mapping[str, Any], extra_keys: Iterable[str] = ()) -> dict[str, Any]:
    """Redact an event's ``data``; idempotent, so the brain calls it again on receipt."""
    extra = tuple(extra_keys)
    fields = {k: v for k, v in data.items() if k != "traceback"}
    out: dict[str, Any] = redact(fields, extra, EVENT_LIMITS)
    traceback = data.get("traceback")
    if "traceback" in data:
        out["traceback"] = (
            None if traceback is None else redact_text(str(traceback), extra, MAX_TRACEBACK)
        )
    text = json.dumps(out, ensure_ascii=False)
    if not text.isascii() and LONE_SURROGATE.search(text):
        # A lone surrogate has no UTF-8 form, so no frame holding one could be signed.
        text = LONE_SURROGATE.sub("\ufffd", text)
        out = json.loads(text)
    if len(text) > MAX_EVENT_BYTES:
        for name in BULKY_FIELDS:
            if out.get(name) is not None:
                out[name] = "[truncated: event too large]"
        if isinstance(out.get("traceback"), str):
            out["traceback"] = redact_text(out["traceback"], extra, 8 * 1024)
    return out


def redact_received_event_data(data: dict[str, Any]) -> dict[str, Any]:
    """``redact_event_data`` of ``data`` fresh from ``json.loads``, as the brain applies it."""
    return redact_received_events_data([data])[0]


def redact_received_events_data(datas: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """``redact_event_data`` of each event's ``data`` fresh from ``json.loads``.

    Agents redact before sending, so most data arrives as its own redaction and is returned
    as it is (the same object), judged for a whole batch at once without the walk; anything
    else is redacted in full.
    """
    judgeable = [_plain_traceback(data) for data in datas]
    judged = [data for data, j in zip(datas, judgeable, strict=True) if j]
    kept = iter(redacted_json_flags(judged, EVENT_LIMITS))
    # one flag per judgeable event, in order; the others never ask for one
    return [
        data if j and next(kept) else redact_event_data(data)
        for data, j in zip(datas, judgeable, strict=True)
    ]


def _plain_traceback(data: dict[str, Any]) -> bool:
    # a traceback that is not text is redacted in full (it becomes text)
    traceback = data.get("traceback")
    return traceback is None or type(traceback) is str


def make_event(
    kind: str,
    task_id: str | None,
    data: Mapping[str, Any],
    *,
    engine: str = "celery",
    redact_keys: Iterable[str] = (),
    occurred_at: datetime | None = None,
) -> dict[str, Any]:
    """Build one redacted event; task kinds get every standard field, null when unknown."""
    if kind not in EVENT_KINDS:
        raise ValueError(f"unknown event kind {kind!r}")
    full = dict.fromkeys(TASK_FIELDS) if kind in TASK_KINDS else {}
    full.update(data)
    return {
        "id": new_event_id(),
        "engine": engine,
        "kind": kind,
        "task_id": None if task_id is None else LONE_SURROGATE.sub("\ufffd", str(task_id)),
        "occurred_at": utc_iso(occurred_at),
        "data": redact_event_data(full, redact_keys),
    }
