"""An idle Gemini CLI session is woken by a message: a real ``gemini -p`` on a stand-in Gemini API
(``GOOGLE_GEMINI_BASE_URL``), configured by ``agentbus install gemini``, answers its prompt; our
AfterAgent hook stores the turn's usage from the chat recording and holds; bob sends alice a
message, and the session's next model request carries it. Prints ``wake_ms`` as the Claude
Code test does."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
from pathlib import Path

import pytest
from agentbus.e2e import BIN, World, until
from agentbus.e2e_harnesses import StandInGemini, harness_cli, report_wake

pytestmark = pytest.mark.timeout(300)
MODEL = "gemini-2.5-flash"


async def test_a_message_wakes_an_idle_gemini_session(pair: World, tmp_path: Path) -> None:
    alice, bob = pair.alice, pair.bob
    gemini = str(harness_cli("gemini"))
    home, project = tmp_path / "home", tmp_path / "project"
    (home / ".gemini").mkdir(parents=True)
    project.mkdir()
    settings = {"security": {"auth": {"selectedType": "gemini-api-key"}},
                "privacy": {"usageStatisticsEnabled": False},
                "general": {"disableAutoUpdate": True}}  # fmt: skip
    (home / ".gemini" / "settings.json").write_text(json.dumps(settings))
    env = {**alice.env, "HOME": str(home), "GEMINI_API_KEY": "stand-in",
           "GEMINI_CLI_TRUST_WORKSPACE": "true", "NO_COLOR": "1"}  # fmt: skip
    installing = await asyncio.create_subprocess_exec(
        str(BIN / "agentbus"), "install", "gemini", "--idle-wait", "120", "--json",
        env=env, cwd=project, stdout=subprocess.PIPE,
    )  # fmt: skip
    await asyncio.wait_for(installing.communicate(), 60)
    with StandInGemini() as model:
        process = await asyncio.create_subprocess_exec(
            gemini, "-p", "wait for your colleagues", "--output-format", "json", "-m", MODEL,
            env={**env, "GOOGLE_GEMINI_BASE_URL": model.url}, cwd=project,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
            start_new_session=True,
        )  # fmt: skip
        try:

            async def first_turn_done() -> bool:
                if process.returncode is not None:
                    out, err = await process.communicate()
                    raise AssertionError(f"gemini stopped: {out.decode()} {err.decode()}")
                return len(model.arrivals) >= 1

            await until(first_turn_done, 120, "gemini's first model request")

            async def usage_stored() -> bool:
                return bool(alice.query("SELECT id FROM usage_local"))

            await until(usage_stored, 60, "the AfterAgent hook storing the turn's usage")
            assert len(model.arrivals) == 1
            sent = await bob.cli("send", alice.address, "wake up, alice: PR 9 is ready")
            msg_id = sent.get("msg_id") or sent["message"]["id"]

            async def woken() -> bool:
                return len(model.arrivals) >= 2

            await until(woken, 60, "the woken session's next model request")
            workload = "send accepted -> woken gemini -p model request"
            report_wake(pair.stack.database_url, msg_id, model.arrivals[1], workload)
            assert "wake up, alice: PR 9 is ready" in model.prompts[1]
            records = [json.loads(bytes(r["body"])) for r in alice.query(
                "SELECT body FROM usage_local")]  # fmt: skip
            assert records  # one per turn: the first, and the woken one once it has ended
            assert {(r["harness"], r["model"], r["input_tokens"]) for r in records} == {
                ("gemini", MODEL, 100)
            }
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
            await process.wait()
