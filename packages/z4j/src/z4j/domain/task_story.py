"""What a task's events tell beyond its row: its return value and why each retry happened.

Pure: no I/O. The events are the task's timeline rows (``event_type``, ``ts``, ``payload``);
payloads are the agent's redacted event data, redacted again on receipt. The Celery agent
sends the return value as ``result`` (a bounded ``repr``) on ``succeeded``, and the retry's
``reason`` and ``exception`` ({type, message}) on ``retry``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

MAX_REASON = 1000


@dataclass(frozen=True, slots=True)
class Retry:
    at: datetime
    reason: str | None
    exc_type: str | None
    exc_msg: str | None


def _text(value: object, limit: int = MAX_REASON) -> str | None:
    return None if value is None else str(value)[:limit]


def result_of(events: Sequence[Mapping[str, Any]]) -> tuple[bool, Any]:
    """(whether a return value was reported, the latest reported one)."""
    for event in reversed(events):
        payload = event.get("payload")
        succeeded = event.get("event_type") == "succeeded"
        if succeeded and isinstance(payload, dict) and "result" in payload:
            return True, payload["result"]
    return False, None


def retries_of(events: Sequence[Mapping[str, Any]]) -> list[Retry]:
    """Each retry in timeline order, with the reason and exception it carried."""
    out = []
    for event in events:
        if event.get("event_type") != "retry":
            continue
        payload = event.get("payload")
        payload = payload if isinstance(payload, dict) else {}
        exc = payload.get("exception")
        exc = exc if isinstance(exc, dict) else {}
        out.append(
            Retry(event["ts"], _text(payload.get("reason")), _text(exc.get("type"), 200),
                  _text(exc.get("message")))
        )  # fmt: skip
    return out
