"""Event records: shape, ids, timestamps, redaction and size bounds."""

from __future__ import annotations

import json
import re
import uuid

import pytest
from z4j_agent.events import (
    EVENT_KINDS,
    MAX_EVENT_BYTES,
    TASK_FIELDS,
    make_event,
    new_event_id,
    redact_event_data,
)


def test_task_event_shape() -> None:
    event = make_event("task.started", "abc", {"task_name": "t", "kwargs": {"password": "pw"}})
    assert set(event) == {"id", "engine", "kind", "task_id", "occurred_at", "data"}
    assert event["engine"] == "celery"
    assert event["task_id"] == "abc"
    assert set(TASK_FIELDS) <= set(event["data"])
    assert event["data"]["kwargs"] == {"password": "[redacted]"}
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z", event["occurred_at"])


def test_worker_events_carry_only_their_data() -> None:
    event = make_event("worker.online", None, {"worker": "w@h"})
    assert event["data"] == {"worker": "w@h"}
    assert event["task_id"] is None


def test_unknown_kind_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown event kind"):
        make_event("task.exploded", "x", {})
    assert "task.rejected" in EVENT_KINDS
    assert "worker.heartbeat" in EVENT_KINDS


def test_ids_are_unique_time_ordered_uuid7() -> None:
    ids = [new_event_id() for _ in range(2000)]
    assert len(set(ids)) == len(ids)
    parsed = [uuid.UUID(i) for i in ids]
    assert all(p.version == 7 and p.variant == uuid.RFC_4122 for p in parsed)
    stamps = [p.int >> 80 for p in parsed]
    assert stamps == sorted(stamps)


def test_huge_events_are_bounded() -> None:
    data = {"args": ["x" * 10_000] * 100, "traceback": "line\n" * 100_000}
    event = make_event("task.failed", "t", data)
    assert len(json.dumps(event)) <= MAX_EVENT_BYTES
    assert event["data"]["args"] == "[truncated: event too large]"
    assert redact_event_data(event["data"]) == event["data"]


def test_event_data_redaction_is_idempotent() -> None:
    data = make_event(
        "task.failed",
        "t",
        {
            "exception": {"type": "E", "message": "token=abc"},
            "traceback": "Traceback\n  password='x'\n" * 5000,
        },
    )["data"]
    assert "abc" not in json.dumps(data)
    assert redact_event_data(data) == data
