"""How a send outcome reads on a terminal (a task request, and its repeat), a task's fields, and
the gateway's steps of a trace."""

from __future__ import annotations

from typing import Any

import pytest
from agentbus_sidecar.actions.sending import SendOutcome
from agentbus_sidecar.cli.render import (
    print_inbox,
    progress_text,
    show_outcome,
    task_field,
    trace_event_text,
)
from rich.console import Console

ORIGINAL = "msg_01a12f72923b7c4d9e8f0a1b2c3d4e5f"
REPEAT = "msg_01a12f72a0017c4d9e8f0a1b2c3d4e60"
ENVELOPE = {
    "id": REPEAT,
    "type": "agentbus.task.request.v1",
    "recipient": "agent://acme/main/bob",
    "conversation": "cnv_01a12f72923a7e01b2c3d4e5f6a7b8c9",
    "subject": "tsk_" + REPEAT.removeprefix("msg_"),
}
RECEIPT = {"id": "rcp_01a12f72923c7000a1b2c3d4e5f6a7b8", "seq": 7, "accepted_at": "x"}


def test_a_request_names_its_own_task(capsys: pytest.CaptureFixture[str]) -> None:
    show_outcome(False, SendOutcome(ENVELOPE, "sent", receipt=RECEIPT))

    out = capsys.readouterr().out
    assert f"sent task.request {REPEAT} to agent://acme/main/bob" in out
    assert f"task tsk_{REPEAT.removeprefix('msg_')}" in out


def test_a_repeat_names_the_original_task_and_says_nothing_was_sent(
    capsys: pytest.CaptureFixture[str],
) -> None:
    show_outcome(False, SendOutcome(ENVELOPE, "sent", receipt=RECEIPT, repeat_of=ORIGINAL))

    out = " ".join(capsys.readouterr().out.split())
    assert f"already asked: {REPEAT} repeats {ORIGINAL}" in out
    assert "nothing new was sent" in out
    assert f"task tsk_{ORIGINAL.removeprefix('msg_')}" in out
    assert f"tsk_{REPEAT.removeprefix('msg_')}" not in out


def test_a_task_shows_its_progress_in_words_and_its_objects_as_json() -> None:
    at = "2026-12-02T12:34:33.819Z"
    report = {"at": at, "stage": None, "message": "tests pass", "percent": 60}
    assert task_field("progress", report) == f"60% tests pass (at {at})"
    assert task_field("usage", {"cost_usd": "0.50"}) == '{"cost_usd": "0.50"}'
    assert task_field("state", "in_progress") == "in_progress"
    assert progress_text({"percent": 0, "stage": "setup"}) == "0% setup"


def _step(event: str, attempt: int = 0, details: dict[str, object] | None = None) -> dict[str, Any]:
    return {"event": event, "attempt": attempt, "details": details or {}, "error_code": None}


def test_a_trace_step_says_what_it_holds() -> None:
    by = "msg_01a2370d4856724282cc7398fba4c39e"
    assert trace_event_text(_step("message.accepted")) == "message.accepted"
    published = _step("message.published", 0, {"stream_seq": 3})
    assert trace_event_text(published) == "message.published  stream seq 3"
    assert trace_event_text(_step("message.fetched", 2)) == "message.fetched  attempt 2"
    created = _step("task.state_changed", 1, {"from": None, "to": "submitted", "by_msg_id": by})
    assert trace_event_text(created) == f"task.state_changed  -> submitted  by {by}"
    moved = {"from": "in_progress", "to": "failed", "reason": "tests broke", "by_msg_id": None}
    failed = _step("task.state_changed", 1, moved)
    assert trace_event_text(failed) == "task.state_changed  in_progress -> failed  (tests broke)"
    refused = _step("message.read", 1) | {"error_code": "AB-3001"}
    assert trace_event_text(refused) == "message.read  attempt 1  AB-3001"
    dead = _step("message.dead_lettered", 10, {"reason": "max_deliveries"})
    assert trace_event_text(dead) == "message.dead_lettered  max_deliveries  attempt 10"
    pol = "pol_01a12f72923b7c4d9e8f0a1b2c3d4e5f"
    discarded = _step("message.discarded", 1, {"policy_id": pol}) | {"error_code": "AB-4004"}
    assert trace_event_text(discarded) == f"message.discarded  attempt 1  AB-4004  policy {pol}"


def test_the_inbox_says_how_many_files_a_message_attached() -> None:
    blob = {"blob": "blb_01a2370ee7b97013b4b39dabcb055ecd", "name": "change.diff"}
    item = {"msg_id": ORIGINAL, "time": "t", "from": "agent://acme/main/alice", "read_at": None,
            "type": "agentbus.message.v1", "out_of_order": False}  # fmt: skip
    out = Console(record=True, width=200)
    print_inbox(out, [item | {"data": {"text": "The patch", "attachments": [blob, blob]}}])
    print_inbox(out, [item | {"data": {"text": "No files"}}])
    lines = out.export_text().splitlines()
    assert lines[0].endswith("message (2 attached)")
    assert lines[1].strip() == "The patch"
    assert lines[2].endswith("message")
