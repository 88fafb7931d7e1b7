"""The agentbus CLI offline: setup, sends that queue, the local inbox, doctor, exit codes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from agentbus_sidecar.cli import app
from agentbus_sidecar.clock import utcnow
from agentbus_sidecar.credentials import load_credentials
from agentbus_sidecar.envelope import verify_envelope
from agentbus_sidecar.keys import public_key_b64url
from agentbus_sidecar.store import inbox, open_store, outbox
from agentbus_sidecar.store.inbox import Delivery
from typer.testing import CliRunner, Result

ME = "agent://acme/platform/planner"
PEER = "agent://acme/platform/reviewer"
TOKEN = "ab_test_" + "Zk" * 20
DeliveryFactory = Callable[..., dict[str, Any]]


def cli(*args: str, stdin: str | None = None) -> Result:
    return CliRunner().invoke(app, list(args), input=stdin)


def cli_json(*args: str, code: int = 0) -> Any:
    result = cli(*args, "--json")
    assert result.exit_code == code, result.output + result.stderr
    return json.loads(result.stdout)


def _secrets(agent: Any) -> list[str]:
    body = agent.creds.private_key.split("-----")[2].strip().replace("\n", "")
    return [agent.creds.integration_token, body]


def _seed(agent: Any, raw: dict[str, Any]) -> None:
    conn = open_store(agent.db_path)
    try:
        d = Delivery(raw["msg_id"], raw["stream_seq"], 1, raw["ack_token"], raw["envelope"])
        inbox.store_delivery(conn, d, utcnow())
        inbox.mark_transport_acked(conn, raw["msg_id"])
    finally:
        conn.close()


def _queued(agent: Any) -> list[dict[str, Any]]:
    conn = open_store(agent.db_path)
    try:
        return [json.loads(bytes(r["body"])) for r in outbox.rows(conn, kind="send")]
    finally:
        conn.close()


def test_init_writes_private_credentials_and_never_prints_secrets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, dead_gateway: str
) -> None:
    path = tmp_path / "credentials.json"
    monkeypatch.setenv("AGENTBUS_CREDENTIALS", str(path))
    monkeypatch.setenv("AGENTBUS_TOKEN", TOKEN)
    result = cli("init", "--gateway", dead_gateway, "--address", "agent://Acme/platform/planner")
    assert result.exit_code == 0, result.output
    assert os.stat(path).st_mode & 0o777 == 0o600
    creds = load_credentials(path)
    assert creds.address == ME
    body = creds.private_key.split("-----")[2].strip().replace("\n", "")
    assert TOKEN not in result.output
    assert body[:20] not in result.output
    assert "ab_test_ZkZkZk...ZkZk" in result.output
    again = cli("init", "--gateway", dead_gateway, "--address", ME)
    assert again.exit_code == 5
    assert "--force" in again.stderr
    summary = cli_json("init", "--gateway", dead_gateway, "--address", ME, "--force")
    assert summary["address"] == ME
    assert summary["agent_id"] is None
    assert TOKEN not in json.dumps(summary)


def test_login_stores_a_token_without_showing_it(agent: Any) -> None:
    new = "ab_live_" + "N3" * 20
    result = cli("login", "--token", new)
    assert result.exit_code == 0, result.output
    assert new not in result.output
    assert load_credentials(agent.creds_path).integration_token == new
    assert cli("login", "--token", "nope").exit_code == 5


def test_send_while_offline_queues_a_signed_envelope(agent: Any) -> None:
    result = cli("send", PEER, "hello", "--title", "Hi")
    assert result.exit_code == 0, result.output
    assert "queued" in result.output
    assert "sent as soon as" not in result.output
    assert "agentbus sidecar run" in result.output
    [envelope] = _queued(agent)
    assert envelope["source"] == ME
    assert envelope["recipient"] == PEER
    assert envelope["data"] == {"text": "hello", "title": "Hi"}
    verify_envelope(envelope, agent.key.public_key())
    empty = cli("send", PEER, "-")  # standard input is empty: nothing to send
    assert empty.exit_code == 2
    assert "no text given" in empty.output


def test_send_reads_standard_input_and_reports_json(agent: Any) -> None:
    result = CliRunner().invoke(app, ["send", PEER, "--json"], input="from stdin\n")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["state"] == "queued"
    assert data["to"] == PEER
    assert data["receipt"] is None
    assert _queued(agent)[0]["data"]["text"] == "from stdin\n"


@pytest.mark.parametrize(
    ("args", "code"),
    [
        (("send", "agent://acme/platform", "x"), 2),
        (("send", PEER, "x", "--format", "html"), 2),
        (("send", PEER, "x", "--conversation", "cnv_nope"), 2),
        (("register",), 3),
        (("task", "accept", "tsk_" + "1" * 12 + "7" + "0" * 3 + "8" + "0" * 15), 3),
        (("trace", "msg_" + "1" * 32), 3),
    ],
)
def test_exit_codes(agent: Any, args: tuple[str, ...], code: int) -> None:
    result = cli(*args)
    assert result.exit_code == code, result.output + result.stderr


def test_commands_without_credentials_exit_5(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENTBUS_CREDENTIALS", str(tmp_path / "none.json"))
    result = cli("inbox")
    assert result.exit_code == 5
    assert "agentbus init" in result.stderr
    assert cli_json("send", PEER, "x", code=5)["error"]["exit_code"] == 5


def test_insecure_credentials_are_refused(agent: Any) -> None:
    os.chmod(agent.creds_path, 0o644)
    result = cli("send", PEER, "x")
    assert result.exit_code == 5
    assert "chmod 600" in result.stderr


def test_inbox_read_ack_and_reply_work_offline(agent: Any, make_delivery: DeliveryFactory) -> None:
    first, second = make_delivery(seq=1), make_delivery(seq=2, data={"text": "second"})
    _seed(agent, first)
    _seed(agent, second)
    listing = cli_json("inbox")
    assert "unreachable" in listing["offline"]
    assert [m["msg_id"] for m in listing["messages"]] == [first["msg_id"], second["msg_id"]]
    human = cli("inbox", "--no-sync")
    assert human.exit_code == 0
    assert first["msg_id"] in human.output

    shown = cli_json("read", first["msg_id"])
    assert shown["acked"] is True
    assert shown["envelope"]["data"]["text"] == "message 1"
    assert cli_json("read", second["msg_id"], "--no-ack")["acked"] is False
    assert cli_json("ack", second["msg_id"])["acked"] == {second["msg_id"]: True}
    assert cli("ack", second["msg_id"]).exit_code == 1  # already read
    assert cli_json("inbox", "--no-sync")["messages"] == []
    assert len(cli_json("inbox", "--no-sync", "--all")["messages"]) == 2

    reply = cli_json("reply", first["msg_id"], "thanks")
    assert reply["state"] == "queued"
    assert reply["to"] == PEER
    [envelope] = _queued(agent)
    assert envelope["correlation"] == first["msg_id"]
    assert envelope["conversation"] == first["envelope"]["conversation"]
    assert envelope["traceparent"].split("-")[1] == first["envelope"]["traceparent"].split("-")[1]
    states = {row["id"]: row["kind"] for row in cli_json("outbox")["outbox"]}
    assert states[f"ack:{first['msg_id']}:application"] == "ack"


def test_a_senders_control_characters_are_shown_escaped(
    agent: Any, make_delivery: DeliveryFactory
) -> None:
    hostile = "\x1b[2J\x1b]0;pwned\x07 hello\x9b31m\rFAKE"
    raw = make_delivery(seq=1, data={"text": hostile, "note": hostile})
    _seed(agent, raw)
    for args in (("inbox", "--no-sync"), ("read", raw["msg_id"], "--no-ack")):
        result = cli(*args)
        assert result.exit_code == 0, result.output
        assert not {"\x1b", "\x07", "\x9b", "\r"} & set(result.output), repr(result.output)
        assert "\\x1b[2J\\x1b]0;pwned\\x07 hello\\x9b31m" in result.output
    assert cli_json("read", raw["msg_id"], "--no-ack")["envelope"]["data"]["text"] == hostile


def test_task_request_and_cancel_queue_offline(agent: Any) -> None:
    requested = cli_json("task", "request", PEER, "review PR 4411", "--capability", "code.review",
                         "--idempotency-key", "pr-4411", "--budget", "2.00")  # fmt: skip
    task_id = requested["task_id"]
    assert requested["state"] == "queued"
    assert task_id == "tsk_" + requested["msg_id"][4:]
    cancelled = cli_json("task", "cancel", task_id, "--reason", "not needed")
    assert cancelled["state"] == "queued"
    assert cancelled["to"] == PEER
    request, cancel = _queued(agent)
    assert request["data"]["budget"] == {"currency": "USD", "max": "2.00"}
    assert request["idempotencykey"] == "pr-4411"
    assert cancel["type"] == "agentbus.task.cancel.v1"
    assert (cancel["subject"], cancel["correlation"]) == (task_id, request["id"])
    assert cancel["conversation"] == request["conversation"]
    refused = cli("task", "complete", task_id, "done")  # we are the requester, not the recipient
    assert refused.exit_code == 2
    assert "only the recipient" in refused.stderr


def test_task_lifecycle_as_recipient(agent: Any, make_delivery: DeliveryFactory) -> None:
    raw = make_delivery(type="agentbus.task.request.v1", data={"instructions": "do it"},
                        capability="code.review", to=ME)  # fmt: skip
    _seed(agent, raw)
    task_id = raw["envelope"]["subject"]
    for args in (("accept", "--note", "on it"), ("progress", "tests pass", "--percent", "40"),
                 ("complete", "all good", "--output", '{"ok": true}')):  # fmt: skip
        data = cli_json("task", args[0], task_id, *args[1:])
        assert data["state"] == "queued"
        assert data["to"] == PEER
    types = [e["type"] for e in _queued(agent)]
    assert types == ["agentbus.task.accept.v1", "agentbus.task.progress.v1",
                     "agentbus.task.complete.v1"]  # fmt: skip
    assert _queued(agent)[1]["data"] == {"percent": 40, "message": "tests pass"}
    assert _queued(agent)[2]["data"] == {"summary": "all good", "output": {"ok": True}}
    assert cli("task", "cancel", task_id).exit_code == 2  # only the requester cancels


def test_trace_and_read_show_the_local_half_offline(agent: Any) -> None:
    msg_id = cli_json("send", PEER, "hello")["msg_id"]
    traced = cli_json("trace", msg_id)
    assert traced["local"]["outbox"] is True
    assert traced["offline"]
    assert traced["local"]["events"][0]["event"] == "queued"
    assert cli_json("read", msg_id)["envelope"]["id"] == msg_id


def test_outbox_lists_and_drops(agent: Any) -> None:
    msg_id = cli_json("send", PEER, "hello")["msg_id"]
    [row] = cli_json("outbox")["outbox"]
    assert (row["id"], row["state"], row["attempts"]) == (msg_id, "queued", 1)
    assert cli_json("outbox", "--drop", msg_id)["outbox"] == []
    assert cli("outbox", "--drop", msg_id).exit_code == 1


def test_doctor_reports_problems(
    agent: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    report = cli_json("doctor", code=1)
    checks = {c["name"]: c["status"] for c in report["checks"]}
    assert checks["credentials mode"] == "ok"
    assert checks["agent key"] == "ok"
    assert checks["registration"] == "ok"
    assert checks["gateway"] == "fail"
    assert checks["state.db"] == "warn"  # not created yet
    cli("send", PEER, "x")
    checks = {c["name"]: c for c in cli_json("doctor", code=1)["checks"]}
    assert checks["state.db"]["status"] == "ok"
    assert "integrity ok" in checks["state.db"]["detail"]

    os.chmod(agent.creds_path, 0o640)
    human = cli("doctor")
    assert human.exit_code == 1
    assert "chmod 600" in human.output
    for secret in _secrets(agent):
        assert secret not in human.output

    bare = tmp_path / "bare.json"
    monkeypatch.setenv("AGENTBUS_CREDENTIALS", str(bare))
    monkeypatch.delenv("AGENTBUS_TOKEN", raising=False)
    assert cli("init", "--gateway", agent.creds.gateway_url, "--address", ME).exit_code == 0
    checks = {c["name"]: c["status"] for c in cli_json("doctor", code=1)["checks"]}
    assert checks["registration"] == "fail"
    assert checks["token"] == "fail"


def test_sidecar_once_offline(agent: Any) -> None:
    data = cli_json("sidecar", "run", "--once", "--wait", "0")
    assert "unreachable" in data["offline"]
    assert data["sent"] == []


def test_no_command_prints_a_secret(agent: Any, make_delivery: DeliveryFactory) -> None:
    _seed(agent, make_delivery())
    outputs = [cli(*args) for args in (("inbox",), ("outbox",), ("doctor",), ("send", PEER, "x"))]
    for result in outputs:
        for secret in _secrets(agent):
            assert secret not in result.output + result.stderr
    assert public_key_b64url(agent.key) not in outputs[2].output


def test_a_json_command_loads_no_terminal_libraries(agent: Any) -> None:
    """Agents and their hooks run the CLI many times a session: a ``--json`` command starts
    without rich, click or pygments (httpx's own CLI would bring all three)."""
    probe = (
        "import sys\n"
        "from agentbus_sidecar.cli import main\n"
        "sys.argv = ['agentbus', 'outbox', '--json']\n"
        "try:\n"
        "    main()\n"
        "except SystemExit:\n"
        "    pass\n"
        "heavy = sorted({m.split('.')[0] for m in sys.modules} & {'rich', 'click', 'pygments'})\n"
        "print(heavy, file=sys.stderr)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, env=os.environ, check=False
    )
    assert json.loads(done.stdout)["outbox"] == [], done.stdout + done.stderr
    assert done.stderr.strip().splitlines()[-1] == "[]", done.stderr


def test_sidecar_run_refuses_an_unknown_delivery(agent: Any) -> None:
    refused = cli("sidecar", "run", "--delivery", "carrier-pigeon")
    assert refused.exit_code == 2
    assert "websocket, long-poll" in refused.output + refused.stderr
