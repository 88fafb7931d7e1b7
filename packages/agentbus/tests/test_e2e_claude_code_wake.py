"""An idle Claude Code session is woken by a message: a real ``claude -p`` on the stand-in
Anthropic API ends its first turn, our Stop hook (installed by ``agentbus install claude-code``)
holds the stop, bob sends alice a message, and the session's next model request carries it.

Prints the time from the gateway's acceptance of the send to that model request
(``wake_ms``), the figure 08-HARNESS-ADAPTERS.md quotes."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
from pathlib import Path

import pytest
from agentbus.e2e import BIN, World, until
from agentbus.e2e_harnesses import StandInAnthropic, harness_cli, report_wake

pytestmark = pytest.mark.timeout(300)
MODEL = "claude-sonnet-4-5-20250929"


async def test_a_message_wakes_an_idle_claude_code_session(pair: World, tmp_path: Path) -> None:
    alice, bob = pair.alice, pair.bob
    claude = str(harness_cli("claude"))
    home, project = tmp_path / "home", tmp_path / "project"
    home.mkdir()
    project.mkdir()
    env = {**alice.env, "HOME": str(home), "DISABLE_AUTOUPDATER": "1",
           "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "ENABLE_TOOL_SEARCH": "false",
           "ANTHROPIC_API_KEY": "sk-stand-in", "MCP_CONNECT_TIMEOUT_MS": "60000"}  # fmt: skip
    installing = await asyncio.create_subprocess_exec(
        str(BIN / "agentbus"), "install", "claude-code", "--idle-wait", "120", "--json",
        env=env, cwd=project, stdout=subprocess.PIPE,
    )  # fmt: skip
    await asyncio.wait_for(installing.communicate(), 60)
    with StandInAnthropic("no-such-tool", {}) as model:
        process = await asyncio.create_subprocess_exec(
            claude, "-p", "wait for your colleagues", "--output-format", "json",
            "--model", MODEL, env={**env, "ANTHROPIC_BASE_URL": model.url}, cwd=project,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
            start_new_session=True,
        )  # fmt: skip
        try:

            async def first_turn_done() -> bool:
                assert process.returncode is None, "claude stopped before it was woken"
                return len(model.arrivals) >= 1

            await until(first_turn_done, 120, "claude's first model request")
            await asyncio.sleep(3)  # the turn ends and the Stop hook starts holding
            assert len(model.arrivals) == 1
            sent = await bob.cli("send", alice.address, "wake up, alice: PR 7 is ready")
            msg_id = sent.get("msg_id") or sent["message"]["id"]

            async def woken() -> bool:
                return len(model.arrivals) >= 2

            await until(woken, 60, "the woken session's next model request")
            workload = "send accepted -> woken claude -p model request"
            wake_ms = report_wake(pair.stack.database_url, msg_id, model.arrivals[1], workload)
            assert "wake up, alice: PR 7 is ready" in model.prompts[1]
            assert msg_id in model.prompts[1]
            assert wake_ms < 30_000
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
            await process.wait()
