"""``agentbus install`` / ``uninstall`` edits and the Claude Code Stop hook, without a gateway
(the agent fixture is registered already; the real harness CLIs reading these files are tested
end to end in the gateway package)."""

from __future__ import annotations

import copy
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
import tomlkit
from agentbus_sidecar.adapters.claude import stop_hook
from agentbus_sidecar.adapters.edits import ListItem, Put, apply_install, apply_uninstall
from agentbus_sidecar.adapters.harnesses import HARNESSES
from agentbus_sidecar.adapters.install import install, uninstall
from agentbus_sidecar.clock import utcnow
from agentbus_sidecar.inbound import accept_deliveries
from agentbus_sidecar.store import inbox, open_store
from hypothesis import given
from hypothesis import strategies as st

from .conftest import ME, Agent, DeliveryFactory

leaf = st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=5))
documents = st.recursive(
    leaf,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=12,
)
user_docs = st.dictionaries(st.sampled_from(["mcpServers", "hooks", "theme", "x"]), documents)

EDITS = [
    Put(("mcpServers", "agentbus"), {"command": "/bin/agentbus", "args": ["mcp", "serve"]}),
    ListItem(("hooks", "Stop"), {"hooks": [{"command": "agentbus hook"}]},
             lambda item: isinstance(item, dict) and "hooks" in item
             and item["hooks"] == [{"command": "agentbus hook"}]),
]  # fmt: skip


@given(user_docs)
def test_install_twice_is_install_once_and_uninstall_gives_the_document_back(
    doc: dict[str, Any],
) -> None:
    # a document where our entries could not go (a list where a table is wanted) is not ours
    for key, value in doc.items():
        if not isinstance(value, dict):
            doc[key] = {"kept": value}
    doc.get("mcpServers", {}).pop("agentbus", None)
    stop = doc.get("hooks", {}).get("Stop")
    if stop is not None and not isinstance(stop, list):
        doc["hooks"]["Stop"] = [stop]
    if isinstance(doc.get("hooks", {}).get("Stop"), list):
        doc["hooks"]["Stop"] = [i for i in doc["hooks"]["Stop"] if not EDITS[1].ours(i)]
    # containers of ours that are empty are dropped with our entries: none to begin with
    if doc.get("hooks", {}).get("Stop") == []:
        del doc["hooks"]["Stop"]
    for key in ("mcpServers", "hooks"):
        if doc.get(key) == {}:
            del doc[key]
    original = copy.deepcopy(doc)
    apply_install(doc, EDITS)
    once = copy.deepcopy(doc)
    apply_install(doc, EDITS)
    assert doc == once
    assert doc["mcpServers"]["agentbus"] == EDITS[0].value
    apply_uninstall(doc, EDITS)
    assert doc == original


async def test_every_harness_installs_idempotently_and_uninstalls_exactly(
    agent: Agent, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home, project = tmp_path / "home", tmp_path / "project"
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("CODEX_HOME", raising=False)
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    (project / ".gemini").mkdir(parents=True)
    (project / ".gemini" / "settings.json").write_text('{"theme": "dark"}')
    (home / ".codex").mkdir(parents=True)
    mine = '# my settings\nmodel = "o3"\n\n[mcp_servers.other]\ncommand = "x"\n'
    (home / ".codex" / "config.toml").write_text(mine)
    for harness in HARNESSES:
        for scope in (project, None):
            first, registered = await install(
                harness.name, agent.creds_path, agent.state_dir, project=scope, wait_s=60
            )
            assert registered is None  # the fixture's agent is registered
            assert {c.outcome for c in first} <= {"created", "updated"}, first
            again, _ = await install(
                harness.name, agent.creds_path, agent.state_dir, project=scope, wait_s=60
            )
            assert {c.outcome for c in again} == {"unchanged"}, again
    codex = tomlkit.parse((home / ".codex" / "config.toml").read_text())
    server = codex["mcp_servers"]["agentbus"]  # type: ignore[index]
    assert server["args"][-2:] == ["mcp", "serve"]  # type: ignore[index]
    assert str(agent.creds_path) in server["args"]  # type: ignore[operator]
    claude = json.loads((project / ".claude" / "settings.local.json").read_text())
    assert claude["enabledMcpjsonServers"] == ["agentbus"]
    assert "hook claude-code stop --wait 60" in claude["hooks"]["Stop"][0]["hooks"][0]["command"]
    opencode = json.loads((project / "opencode.json").read_text())
    assert opencode["mcp"]["agentbus"]["type"] == "local"
    assert codex["notify"][-3:] == ["hook", "codex", "notify"]  # type: ignore[index]
    assert str(agent.creds_path) in codex["notify"]  # type: ignore[operator]
    gemini = json.loads((project / ".gemini" / "settings.json").read_text())
    after = gemini["hooks"]["AfterAgent"][0]["hooks"][0]
    assert "hook gemini after-agent --wait 60" in after["command"]
    assert after["timeout"] == 90_000
    plugin = (project / ".opencode" / "plugins" / "agentbus.js").read_text()
    assert "session.idle" in plugin
    assert json.dumps(str(agent.creds_path)) in plugin
    for harness in HARNESSES:
        for scope in (project, None):
            uninstall(harness.name, agent.creds_path, agent.state_dir, project=scope)
    assert (home / ".codex" / "config.toml").read_text() == mine
    assert json.loads((project / ".gemini" / "settings.json").read_text()) == {"theme": "dark"}
    assert not (project / ".mcp.json").exists()
    assert not (project / "opencode.json").exists()
    assert not (project / ".opencode" / "plugins" / "agentbus.js").exists()
    assert not (home / ".claude.json").exists()


async def test_a_notify_program_of_the_users_is_kept(
    agent: Agent, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CODEX_HOME", str(tmp_path / "codex"))
    (tmp_path / "codex").mkdir()
    theirs = 'notify = ["notify-send", "codex"]\n'
    (tmp_path / "codex" / "config.toml").write_text(theirs)
    await install("codex", agent.creds_path, agent.state_dir, project=None, wait_s=60)
    config = tomlkit.parse((tmp_path / "codex" / "config.toml").read_text())
    assert config["notify"] == ["notify-send", "codex"]
    assert "agentbus" in config["mcp_servers"]  # type: ignore[operator]
    uninstall("codex", agent.creds_path, agent.state_dir, project=None)
    assert (tmp_path / "codex" / "config.toml").read_text() == theirs


def _stored(agent: Agent, make_delivery: DeliveryFactory, seq: int) -> str:
    conn = open_store(agent.db_path)
    try:
        delivery = make_delivery(seq=seq, to=ME, data={"text": f"please look {seq}"})
        accept_deliveries(conn, [delivery], ME, utcnow())
        inbox.mark_transport_acked(conn, delivery["msg_id"])
        return str(delivery["msg_id"])
    finally:
        conn.close()


async def test_the_stop_hook_hands_back_each_new_message_once(
    agent: Agent, make_delivery: DeliveryFactory
) -> None:
    conn: sqlite3.Connection = open_store(agent.db_path)
    try:
        assert await stop_hook(conn, {"session_id": "s1"}, 0) is None
        first = _stored(agent, make_delivery, 1)
        answer = await stop_hook(conn, {"session_id": "s1", "stop_hook_active": False}, 0)
        assert answer is not None
        assert answer["decision"] == "block"
        assert first in answer["reason"]
        assert "please look 1" in answer["reason"]
        assert await stop_hook(conn, {"session_id": "s1"}, 0) is None  # told once

        async def arrives(_seconds: float) -> None:
            _stored(agent, make_delivery, 2)

        held = await stop_hook(conn, {"session_id": "s1"}, 30, sleep=arrives)
        assert held is not None
        assert "please look 2" in held["reason"]
        assert first not in held["reason"]
    finally:
        conn.close()
