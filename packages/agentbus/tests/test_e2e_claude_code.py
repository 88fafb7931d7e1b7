"""A real Claude Code session (``claude -p``, from npm) on a stand-in Anthropic API on loopback,
configured by ``agentbus install claude-code`` (the project's .mcp.json, no --mcp-config): the
scripted model calls our ``send`` tool, and the message reaches bob's sidecar. The Stop hook
stores the session's usage from its transcript, one record per model call, and the next
``agentbus`` command uploads it: the gateway holds it with its computed cost."""

from __future__ import annotations

import asyncio
import json
import subprocess
from decimal import Decimal
from pathlib import Path

import psycopg
import pytest
from agentbus.e2e import BIN, World, until, wait_received
from agentbus.e2e_harnesses import StandInAnthropic, harness_cli

pytestmark = [pytest.mark.timeout(240), pytest.mark.long_module]  # long: run first
MODEL = "claude-sonnet-4-5-20250929"


async def test_a_claude_code_session_sends_through_our_mcp_server(
    pair: World, tmp_path: Path
) -> None:
    alice, bob = pair.alice, pair.bob
    claude = str(harness_cli("claude"))
    home, project = tmp_path / "home", tmp_path / "project"
    home.mkdir()
    project.mkdir()
    env = {**alice.env, "HOME": str(home), "DISABLE_AUTOUPDATER": "1",
           "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "ENABLE_TOOL_SEARCH": "false",
           "ANTHROPIC_API_KEY": "sk-stand-in",
           # `claude -p` waits 5 s by default for MCP servers to connect: short on a busy machine
           "MCP_CONNECT_TIMEOUT_MS": "60000"}  # fmt: skip
    installing = await asyncio.create_subprocess_exec(
        str(BIN / "agentbus"), "install", "claude-code", "--idle-wait", "0", "--json",
        env=env, cwd=project, stdout=subprocess.PIPE,
    )  # fmt: skip
    installed, _ = await asyncio.wait_for(installing.communicate(), 60)
    assert json.loads(installed)["files"], installed
    await bob.start()
    arguments = {"to": bob.address, "text": "hello from claude code"}
    with StandInAnthropic("mcp__agentbus__send", arguments) as model:
        process = await asyncio.create_subprocess_exec(
            claude, "-p", "say hello to bob", "--output-format", "json", "--model", MODEL,
            "--allowedTools", "mcp__agentbus__send",
            env={**env, "ANTHROPIC_BASE_URL": model.url}, cwd=project,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
        )  # fmt: skip
        out, err = await asyncio.wait_for(process.communicate(), 180)
        assert process.returncode == 0, out.decode() + err.decode()
        result = json.loads(out)
        assert result["is_error"] is False, result
        assert any("mcp__agentbus__send" in tools for tools in model.offered), model.offered

    async def arrived() -> list[str]:
        return [
            row["msg_id"]
            for row in bob.received().values()
            if json.loads(bytes(row["envelope"]))["data"]["text"] == "hello from claude code"
        ]

    msg_ids = await until(arrived, 60, "claude's message at bob")
    await wait_received(bob, set(msg_ids), 30, pair.stack)

    # Usage: one record per model call (tool use, then the answer), uploaded by the next command.
    records = [json.loads(bytes(r["body"])) for r in alice.query("SELECT body FROM usage_local")]
    assert len(records) == 2, records
    assert {(r["model"], r["input_tokens"], r["output_tokens"]) for r in records} == {
        (MODEL, 12, 5)
    }
    await alice.cli("inbox")
    assert alice.query("SELECT id FROM usage_local WHERE uploaded = 0") == []
    with psycopg.connect(pair.stack.database_url) as conn:
        rows = conn.execute(
            "SELECT cost_usd, cost_source, confidence, harness FROM usage"
            " WHERE agent_id = %s::uuid",
            (str(alice.agent_id).removeprefix("agt_"),),
        ).fetchall()
    # 12 x $3 + 5 x $15 + 2,000 x $0.30 + 300 x $3.75 per million tokens
    assert sorted(map(tuple, rows)) == [(Decimal("0.001836"), "computed", "exact", "claude")] * 2
