"""Parse a batch of wire events and fold them into one row per task and one per event.

Pure: no I/O. The store applies the folded rows with the same rules in SQL, so the result is the
same whether events arrive in one batch or many, in order or not, once or several times.
"""

from __future__ import annotations

import ast
import hashlib
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from platformkit.storable import INT4_MAX, INT4_MIN
from z4j_agent.events import redact_event_data, redact_received_events_data
from z4j_agent.protocol import parse_ts

from z4j.domain.storable_events import Refusal, event_id_of
from z4j.domain.taskstate import UNKNOWN_ATTEMPT, Claim, TaskState, finished_at, winner
from z4j.domain.wire_events import IGNORED_PREFIXES, WORKER_KINDS, Mapping, map_task_event

_FLOAT_INT_BOUND = 2**1023  # integers past it have no double precision form
_MAX_TEXT = {"name": 500, "queue": 200, "group_id": 200, "worker": 200, "engine_task_id": 200}


def scoped_id(project_id: uuid.UUID, value: str) -> uuid.UUID:
    """Ids agents send are scoped to the project, so no agent can touch another project's rows."""
    return uuid.UUID(scoped_id_text(project_id, value))


def scoped_id_text(project_id: uuid.UUID, value: str) -> str:
    """``str(uuid.uuid5(project_id, value))``, built from the digest without UUID objects.

    Ingest derives one for every event and task and only ever needs the text form.
    """
    digest = bytearray(
        hashlib.sha1(project_id.bytes + value.encode(), usedforsecurity=False).digest()
    )
    digest[6] = (digest[6] & 0x0F) | 0x50  # version 5
    digest[8] = (digest[8] & 0x3F) | 0x80  # RFC 4122 variant
    h = digest[:16].hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


@dataclass
class TaskRow:
    id: str
    engine: str
    engine_task_id: str
    name: str | None = None
    queue: str | None = None
    args: Any = None
    kwargs: Any = None
    group_id: str | None = None
    worker: str | None = None
    enqueued_at: datetime | None = None
    started_at: datetime | None = None
    claim: Claim | None = None
    error: dict[str, Any] | None = None
    runtime_ms: float | None = None
    retries: int = 0

    @property
    def finished_at(self) -> datetime | None:
        return finished_at(self.claim[0], self.claim[1]) if self.claim else None


@dataclass
class EventRow:
    id: str
    task_id: str
    event_type: str
    ts: datetime
    payload: dict[str, Any]


@dataclass
class Folded:
    # by the engine's task id (as cut to its column's length), each row under its scoped id
    tasks: dict[str, TaskRow] = field(default_factory=dict)
    events: list[EventRow] = field(default_factory=list)
    worker_seen: datetime | None = None
    # tasks with a retry that carried no retry count: their retries are counted from the events
    count_retries: set[str] = field(default_factory=set)
    accepted: int = 0
    rejected: int = 0
    refused: list[Refusal] = field(default_factory=list)

    def reject(self, index: int, raw: Any, reason: str) -> None:
        self.rejected += 1
        self.refused.append(Refusal(index, event_id_of(raw), reason))


def _text(data: dict[str, Any], key: str, limit_key: str | None = None) -> str | None:
    value = data.get(key)
    if value is None:
        return None
    return str(value)[: _MAX_TEXT[limit_key or key]]


def _later(a: datetime | None, b: datetime) -> datetime:
    return b if a is None or b > a else a


def _fold_task(
    row: TaskRow, kind: str, state: TaskState | None, at: datetime, data: dict[str, Any]
) -> None:
    row.name = row.name or _text(data, "task_name", "name")
    row.queue = row.queue or _text(data, "queue")
    row.group_id = row.group_id or _text(data, "group_id")
    worker = _text(data, "worker")
    row.worker = row.worker or worker
    if row.args is None and "args" in data:
        row.args = data["args"]
    if row.kwargs is None and "kwargs" in data:
        row.kwargs = data["kwargs"]
    if isinstance(data.get("retry_count"), int):
        row.retries = max(row.retries, data["retry_count"])
    # Without a task.sent (agents that see only the worker) the receipt bounds the enqueue time.
    if state is TaskState.PENDING or kind == "task.received":
        row.enqueued_at = at if row.enqueued_at is None else min(row.enqueued_at, at)
    if state is TaskState.STARTED:
        row.started_at = _later(row.started_at, at)
    if state is None:
        return
    before = row.claim
    attempt = data.get("retry_count")
    row.claim = winner(row.claim, (state, at, attempt if type(attempt) is int else UNKNOWN_ATTEMPT))
    if row.claim != before:
        # The worker shown is the one that produced the task's current state.
        row.worker = worker or row.worker
        row.error = _error(data) if state is TaskState.FAILED else None
        runtime = data.get("runtime_ms")
        row.runtime_ms = float(runtime) if isinstance(runtime, int | float) else None


def _error(data: dict[str, Any]) -> dict[str, Any]:
    exc = data.get("exception")
    exc_type, exc_msg = None, None
    if isinstance(exc, dict):
        exc_type, exc_msg = exc.get("type"), exc.get("message")
    elif exc is not None:
        exc_type, _, exc_msg = str(exc).partition(":")
    # Agents that send the type alone put the message beside it.
    message = data.get("exception_message")
    if not (exc_msg or "").strip() and message is not None:
        exc_msg = _unwrap_repr(str(exc_type or ""), str(message))
    return {
        "exc_type": exc_type,
        "exc_msg": (exc_msg or "").strip() or None,
        "traceback_redacted": data.get("traceback"),
    }


def _unwrap_repr(exc_type: str, message: str) -> str:
    """``ValueError('no')`` -> ``no``: Celery's event stream carries the exception's repr."""
    prefix = f"{exc_type.rsplit('.', 1)[-1]}("
    if exc_type and message.startswith(prefix) and message.endswith(")") and len(message) < 16384:
        try:
            inner = ast.literal_eval(message[len(prefix) : -1])
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            return message
        if isinstance(inner, str):
            return inner
    return message


def _typed_fields_problem(data: dict[str, Any]) -> str | None:
    """Why a field bound for a typed column (``integer``, ``double precision``) cannot be
    stored there, or None."""
    retry_count = data.get("retry_count")
    if type(retry_count) is int and not INT4_MIN <= retry_count <= INT4_MAX:
        return "data.retry_count: integer out of range"
    runtime = data.get("runtime_ms")
    if type(runtime) is int and not -_FLOAT_INT_BOUND < runtime < _FLOAT_INT_BOUND:
        return "data.runtime_ms: number out of range"
    return None


def fold_batch(
    project_id: uuid.UUID, events: list[Any], redact_keys: tuple[str, ...] = ()
) -> Folded:
    """Validate, redact and fold wire events; malformed ones are counted as rejected.
    ``redact_keys`` are the project's own sensitive key names, beside the built-in ones."""
    out = Folded()
    valid: list[tuple[Mapping, datetime, str, str, dict[str, Any], Any]] = []
    for index, raw in enumerate(events):
        try:
            kind = raw["kind"]
            at = parse_ts(raw["occurred_at"])
            data = raw.get("data") or {}
            if not isinstance(kind, str) or not isinstance(data, dict):
                raise TypeError("kind must be a string and data an object")
        except (KeyError, TypeError, ValueError, AttributeError):
            out.reject(index, raw, "malformed: an event needs kind, occurred_at and object data")
            continue
        reason = _typed_fields_problem(data)
        if reason is not None:
            out.reject(index, raw, reason)
            continue
        if kind in WORKER_KINDS:
            out.worker_seen = _later(out.worker_seen, at)
            out.accepted += 1
            continue
        mapping = map_task_event(kind, data)
        engine_task_id = raw.get("task_id")
        event_id = raw.get("id")
        if (
            mapping is None
            or not isinstance(engine_task_id, str)
            or not engine_task_id
            or not isinstance(event_id, str)
            or not event_id
        ):
            if kind.startswith(IGNORED_PREFIXES):
                out.accepted += 1
            else:
                out.reject(index, raw, f"unknown kind {kind[:40]!r} or no task_id and id")
            continue
        valid.append((mapping, at, engine_task_id[:200], event_id[:200], data, raw))
    datas = [v[4] for v in valid]
    redacted = (
        [redact_event_data(data, redact_keys) for data in datas]
        if redact_keys
        else redact_received_events_data(datas)
    )
    for (mapping, at, engine_task_id, event_id, _sent, raw), data in zip(
        valid, redacted, strict=True
    ):
        row = out.tasks.get(engine_task_id)
        if row is None:
            engine = str(raw.get("engine") or "celery")[:40]
            task_id = scoped_id_text(project_id, engine_task_id)
            row = out.tasks[engine_task_id] = TaskRow(task_id, engine, engine_task_id)
        _fold_task(row, raw["kind"], mapping.state, at, data)
        if mapping.state is TaskState.RETRIED and type(data.get("retry_count")) is not int:
            out.count_retries.add(row.id)
        if mapping.event_type is not None:
            # A task is cancelled once, whichever of an agent's sources (signal, event stream)
            # reports it: its cancellation has one id.
            if mapping.state is TaskState.CANCELLED:
                event_id = f"{engine_task_id}:cancelled"
            out.events.append(
                EventRow(scoped_id_text(project_id, event_id), row.id, mapping.event_type, at, data)
            )
        out.accepted += 1
    return out
