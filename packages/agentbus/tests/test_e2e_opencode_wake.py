"""An idle OpenCode session is woken by a message: a real ``opencode serve`` with the Anthropic
provider pointed at the stand-in API (``provider.anthropic.options.baseURL``), configured by
``agentbus install opencode`` (the MCP entry and our plugin). A session answers its prompt; the
plugin stores the message's usage with OpenCode's cost and, on ``session.idle``, holds for a
message; bob sends alice one, and the plugin prompts the session with it: the next model
request carries it. Prints ``wake_ms`` as the Claude Code test does."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
from pathlib import Path

import httpx
import pytest
from agentbus.e2e import BIN, World, until
from agentbus.e2e_harnesses import StandInAnthropic, harness_cli, report_wake
from platformkit.testing.services import free_port

pytestmark = [pytest.mark.timeout(480), pytest.mark.long_module]  # long: run first
MODEL = {"providerID": "anthropic", "modelID": "claude-sonnet-4-5"}
TEXT = "wake up, alice: PR 11 is ready"


async def test_a_message_wakes_an_idle_opencode_session(pair: World, tmp_path: Path) -> None:
    alice, bob = pair.alice, pair.bob
    opencode = str(harness_cli("opencode"))
    home, project = tmp_path / "home", tmp_path / "project"
    home.mkdir()
    project.mkdir()
    env = {**alice.env, "HOME": str(home), "OPENCODE_DISABLE_AUTOUPDATE": "1", "NO_COLOR": "1"}
    env.pop("XDG_CONFIG_HOME", None)
    installing = await asyncio.create_subprocess_exec(
        str(BIN / "agentbus"), "install", "opencode", "--idle-wait", "120", "--json",
        env=env, cwd=project, stdout=subprocess.PIPE,
    )  # fmt: skip
    await asyncio.wait_for(installing.communicate(), 60)
    port = free_port()
    with StandInAnthropic("no-such-tool", {}) as model:
        config = json.loads((project / "opencode.json").read_text())
        config["provider"] = {"anthropic": {"options": {"baseURL": f"{model.url}/v1",
                                                        "apiKey": "sk-stand-in"}}}  # fmt: skip
        (project / "opencode.json").write_text(json.dumps(config))
        server = await asyncio.create_subprocess_exec(
            opencode, "serve", "--port", str(port), env=env, cwd=project,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
            start_new_session=True,
        )  # fmt: skip
        try:
            async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=180) as api:

                async def up() -> dict[str, str] | None:
                    assert server.returncode is None, "opencode serve stopped"
                    try:
                        reply = await api.post("/session", json={}, timeout=10)
                    except httpx.TransportError:
                        return None
                    return dict(reply.json()) if reply.status_code == 200 else None

                session = await until(up, 240, "opencode serve and a session")
                prompt = {"parts": [{"type": "text", "text": "wait for your colleagues"}],
                          "model": MODEL}  # fmt: skip
                answered = await api.post(f"/session/{session['id']}/message", json=prompt)
                assert answered.status_code == 200, answered.text

                async def usage_stored() -> bool:
                    return bool(alice.query("SELECT id FROM usage_local"))

                await until(usage_stored, 60, "the plugin storing the message's usage")
                await asyncio.sleep(3)  # session.idle: the plugin's idle hook is holding
                sent = await bob.cli("send", alice.address, TEXT)
                msg_id = sent.get("msg_id") or sent["message"]["id"]

                # (OpenCode also asks the model for the session's title: requests are told
                # apart by what they carry)
                async def woken() -> list[int]:
                    return [i for i, p in enumerate(model.prompts) if TEXT in p]

                [at, *_] = await until(woken, 60, "the woken session's next model request")
            workload = "send accepted -> woken opencode serve model request"
            report_wake(pair.stack.database_url, msg_id, model.arrivals[at], workload)
            records = [json.loads(bytes(r["body"])) for r in alice.query(
                "SELECT body FROM usage_local")]  # fmt: skip
            first = records[0]
            assert (first["harness"], first["provider"], first["model"]) == (
                "opencode", "anthropic", "claude-sonnet-4-5",
            )  # fmt: skip
            # OpenCode's own cost for the stand-in's tokens, kept as the harness reported it
            assert (first["cost_usd"], first["cost_source"]) == ("0.001836", "harness_reported")
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(server.pid, signal.SIGTERM)
            await server.wait()
