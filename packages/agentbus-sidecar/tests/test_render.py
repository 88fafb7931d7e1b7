"""How a send outcome reads on a terminal: a task request, and its repeat."""

from __future__ import annotations

import pytest
from agentbus_sidecar.actions.sending import SendOutcome
from agentbus_sidecar.cli.render import show_outcome

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
