"""How a send outcome reads on a terminal (a task request, and its repeat), and a task's fields."""

from __future__ import annotations

import pytest
from agentbus_sidecar.actions.sending import SendOutcome
from agentbus_sidecar.cli.render import progress_text, show_outcome, task_field

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
