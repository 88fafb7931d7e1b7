"""How messages, send outcomes, tasks and checks look on a terminal and in ``--json``."""

from __future__ import annotations

import json
import sqlite3
from typing import TYPE_CHECKING, Any

from agentbus_sidecar.actions.sending import SendOutcome
from agentbus_sidecar.cli.common import EXIT_REJECTED, emit, fail
from agentbus_sidecar.store import inbox

if TYPE_CHECKING:
    from rich.console import Console

__all__ = [
    "inbox_item",
    "print_inbox",
    "progress_text",
    "show_envelope",
    "show_outcome",
    "summary_line",
    "task_field",
    "trace_event_text",
]

QUEUED_HINT = (
    "It stays in the outbox and goes out as soon as the gateway is reachable: keep "
    "`agentbus sidecar run` running, or run any agentbus command later."
)


def show_outcome(as_json: bool, outcome: SendOutcome, extra: dict[str, Any] | None = None) -> None:
    data = {**outcome.as_dict(), **(extra or {})}
    if outcome.state == "failed":
        first = (outcome.detail or "").partition(" ")[0].rstrip(":")
        fail(
            f"{outcome.envelope['id']} was refused for good: {outcome.detail}",
            EXIT_REJECTED,
            as_json,
            code=first if first.startswith("AB-") else "refused",
            extra=data,
        )
    env = outcome.envelope

    def human(out: Console) -> None:
        label = env["type"].removeprefix("agentbus.").removesuffix(".v1")
        if outcome.state == "sent":
            receipt = outcome.receipt or {}
            seq = receipt.get("seq")
            if outcome.repeat_of is not None:
                out.print(
                    f"already asked: {env['id']} repeats {outcome.repeat_of} to "
                    f"{env['recipient']} (same idempotency key); nothing new was sent"
                )
            else:
                out.print(
                    f"sent {label} {env['id']} to {env['recipient']} "
                    f"(conversation {env['conversation']})"
                )
            out.print(
                f"  receipt {receipt.get('id')}, "
                + (f"stream seq {seq}" if seq is not None else "stream seq pending")
            )
        else:
            out.print(f"queued {label} {env['id']} for {env['recipient']}: {outcome.detail}")
            out.print(f"  {QUEUED_HINT}")
        if outcome.task_id is not None:
            out.print(f"  task {outcome.task_id}")

    emit(as_json, data, human)


ATTACHING = ("attachments", "artifacts")


def attachments_of(data: dict[str, Any]) -> list[dict[str, Any]]:
    """The files a message's data names: a message's attachments, a task result's artifacts."""
    return [item for key in ATTACHING for item in data.get(key) or []]


def summary_line(data: dict[str, Any]) -> str:
    for key in ("title", "text", "instructions", "summary", "message", "stage", "note", "reason"):
        value = data.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip().splitlines()[0][:100]
    return json.dumps(data, sort_keys=True)[:100]


def inbox_item(row: sqlite3.Row) -> dict[str, Any]:
    env = inbox.envelope_of(row)
    return {
        "msg_id": row["msg_id"],
        "type": row["type"],
        "from": row["from_address"],
        "time": env.get("time"),
        "conversation": row["conversation_id"],
        "subject": env.get("subject"),
        "stream_seq": row["stream_seq"],
        "presented_at": row["presented_at"],
        "read_at": row["read_at"],
        "out_of_order": bool(row["out_of_order"]),
        "redelivery": row["redelivery"],
        "data": env.get("data"),
    }


def print_inbox(out: Console, items: list[dict[str, Any]]) -> None:
    """Two lines per message, ids never cut: a header, then the summary indented."""
    for item in items:
        mark = " " if item["read_at"] else "*"
        kind = item["type"].removeprefix("agentbus.").removesuffix(".v1")
        late = " (arrived late)" if item["out_of_order"] else ""
        files = len(attachments_of(item["data"] or {}))
        attached = f" ({files} attached)" if files else ""
        out.print(
            f"{mark} {item['msg_id']}  {item['time']}  {item['from']}  {kind}{late}{attached}",
            markup=False,
        )
        out.print(f"    {summary_line(item['data'] or {})}", markup=False)


def show_envelope(out: Console, env: dict[str, Any]) -> None:
    for name in (
        "id",
        "type",
        "source",
        "recipient",
        "time",
        "conversation",
        "subject",
        "correlation",
        "capability",
        "priority",
        "expires",
    ):
        if name in env:
            out.print(f"{name:<13} {env[name]}")
    data = env.get("data") or {}
    text = data.get("text") or data.get("instructions") or data.get("summary")
    if isinstance(text, str):
        out.print()
        out.print(text, markup=False)
    attached = attachments_of(data)
    if attached:
        out.print()
        for item in attached:
            out.print(
                f"attached {item.get('name') or item['blob']} ({item.get('content_type', '?')}): "
                f"agentbus blob get {item['blob']} --message {env.get('id')}",
                markup=False,
            )
    rest = {k: v for k, v in data.items() if v is not text and k not in ATTACHING}
    if rest:
        out.print()
        out.print(json.dumps(rest, indent=2, sort_keys=True), markup=False)


def progress_text(progress: dict[str, Any]) -> str:
    """``60% reading diff tests pass``: the percent, stage and message that were reported."""
    parts = [f"{progress['percent']}%"] if progress.get("percent") is not None else []
    parts.extend(str(progress[k]) for k in ("stage", "message") if progress.get(k))
    return " ".join(parts)


def task_field(name: str, value: Any) -> str:
    """A field of ``agentbus task show``: the progress report in words, other objects as JSON."""
    if name == "progress" and isinstance(value, dict):
        return f"{progress_text(value)} (at {value.get('at')})"
    if isinstance(value, dict | list):
        return json.dumps(value, ensure_ascii=False)
    return str(value)


def trace_event_text(event: dict[str, Any]) -> str:
    """A step of the gateway's half of ``agentbus trace``, after its time: what happened, with
    what the step holds (``task.state_changed  submitted -> accepted (by msg_...)``, ``message.
    published  stream seq 3``, a dead-lettering's reason), the delivery attempt of a message step,
    and its error code and policy."""
    details = event.get("details") or {}
    parts = [str(event.get("event"))]
    if event.get("event") == "task.state_changed":
        start = f"{details['from']} " if details.get("from") else ""
        parts.append(f"{start}-> {details.get('to')}")
        if details.get("reason"):
            parts.append(f"({details['reason']})")
        if details.get("by_msg_id"):
            parts.append(f"by {details['by_msg_id']}")
    elif details.get("stream_seq") is not None:
        parts.append(f"stream seq {details['stream_seq']}")
    elif details.get("reason"):  # a dead-lettering's
        parts.append(str(details["reason"]))
    attempt = event.get("attempt") or 0
    if str(event.get("event")).startswith("message.") and attempt > 0:
        parts.append(f"attempt {attempt}")
    if event.get("error_code"):
        parts.append(str(event["error_code"]))
    if details.get("policy_id"):  # the policy that discarded it at delivery
        parts.append(f"policy {details['policy_id']}")
    return "  ".join(parts)
