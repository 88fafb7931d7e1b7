"""``agentbus install <harness>`` checked by each harness's own CLI, from npm, without a model:
its MCP list sees our server (and, where the CLI checks, connects to it: `claude mcp list`,
`gemini mcp list` and `opencode mcp list` start ``agentbus mcp serve`` and talk MCP to it).
Each harness runs with a home folder of the test's own."""

from __future__ import annotations

import asyncio
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from agentbus.e2e import BIN, Sidecar, World
from agentbus.e2e_harnesses import harness_cli

pytestmark = pytest.mark.timeout(240)

QUIET = {
    "DISABLE_AUTOUPDATER": "1",
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    "NO_COLOR": "1",
}


def home_env(sidecar: Sidecar, home: Path) -> dict[str, str]:
    env = {**sidecar.env, **QUIET, "HOME": str(home), "CODEX_HOME": str(home / ".codex")}
    env.pop("XDG_CONFIG_HOME", None)
    return env


async def run(argv: list[str], env: dict[str, str], cwd: Path) -> str:
    process = await asyncio.create_subprocess_exec(
        *argv, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
    )  # fmt: skip
    out, _ = await asyncio.wait_for(process.communicate(), 150)
    text = out.decode(errors="replace")
    assert process.returncode == 0, f"{argv}: {text}"
    return text


async def install(
    sidecar: Sidecar, env: dict[str, str], cwd: Path, *args: str
) -> dict[str, object]:
    out = await run([str(BIN / "agentbus"), "install", *args, "--json"], env, cwd)
    answer: dict[str, Any] = json.loads(out)
    return answer


@pytest.fixture
def folders(tmp_path: Path) -> tuple[Path, Path]:
    home, project = tmp_path / "home", tmp_path / "project"
    home.mkdir()
    project.mkdir()
    return home, project


def line_of(listing: str, name: str = "agentbus") -> str:
    found = [line for line in listing.splitlines() if name in line]
    assert found, listing
    return found[0]


async def test_claude_code_connects_to_our_server(pair: World, folders: tuple[Path, Path]) -> None:
    home, project = folders
    env = home_env(pair.alice, home)
    claude = str(harness_cli("claude"))
    await install(pair.alice, env, project, "claude-code", "--user")
    listed = await run([claude, "mcp", "list"], env, project)
    assert "Connected" in line_of(listed), listed
    await run([str(BIN / "agentbus"), "uninstall", "claude-code", "--user"], env, project)
    assert "agentbus" not in await run([claude, "mcp", "list"], env, project)
    await install(pair.alice, env, project, "claude-code", "--project", str(project))
    shown = await run([claude, "mcp", "get", "agentbus"], env, project)
    # approved by settings.local.json; an interactive session asks once to trust the folder
    assert "Project config" in shown, shown


async def test_codex_lists_our_server(pair: World, folders: tuple[Path, Path]) -> None:
    home, project = folders
    env = home_env(pair.alice, home)
    answer = await install(pair.alice, env, project, "codex", "--user")
    assert [f["path"] for f in answer["files"]] == [str(home / ".codex" / "config.toml")]
    listed = await run([str(harness_cli("codex")), "mcp", "list", "--json"], env, project)
    servers = json.loads(listed[listed.index("[") :])
    ours = [s for s in servers if s["name"] == "agentbus"]
    assert ours, servers
    assert ours[0]["enabled"], servers
    assert ours[0]["transport"]["args"][-2:] == ["mcp", "serve"], ours
    assert 'notify = ["' in (home / ".codex" / "config.toml").read_text()  # accepted above


async def test_each_harness_hook_stores_its_usage(pair: World, tmp_path: Path) -> None:
    """The hook commands as the harnesses run them (usage in, nothing to hand back)."""
    alice, agentbus = pair.alice, str(BIN / "agentbus")
    env = {**alice.env, "CODEX_HOME": str(tmp_path / "codex")}
    recording = tmp_path / "gemini.jsonl"
    tokens = {"input": 100, "output": 5, "cached": 0, "thoughts": 0}
    answer = {"id": "g1", "type": "gemini", "model": "gemini-2.5-flash",
              "timestamp": "2026-11-02T10:00:00.000Z", "tokens": tokens}  # fmt: skip
    recording.write_text(json.dumps(answer) + "\n")
    thread = "0199a213-81c0-7800-8aa1-bbab2a035a53"
    rollout = tmp_path / "codex" / "sessions" / "2026" / "11" / "02" / f"rollout-x-{thread}.jsonl"
    rollout.parent.mkdir(parents=True)
    last = {"input_tokens": 50, "cached_input_tokens": 0, "output_tokens": 7}
    info = {"total_token_usage": {"total_tokens": 57}, "last_token_usage": last}
    rollout.write_text(
        json.dumps({"type": "turn_context", "payload": {"model": "gpt-5-codex"}}) + "\n"
        + json.dumps({"type": "event_msg", "payload": {"type": "token_count", "info": info}})
        + "\n"
    )  # fmt: skip
    message = {"id": "m1", "sessionID": "s1", "role": "assistant", "modelID": "gpt-5",
               "providerID": "openai", "cost": 0.5, "tokens": {"input": 1, "output": 2},
               "time": {"completed": 1_790_000_000_000}}  # fmt: skip
    for argv, stdin in (
        ([agentbus, "hook", "gemini", "after-agent", "--wait", "0"],
         {"session_id": "s1", "transcript_path": str(recording)}),
        ([agentbus, "hook", "codex", "notify",
          json.dumps({"type": "agent-turn-complete", "thread-id": thread})], {}),
        ([agentbus, "hook", "opencode", "usage"], message),
        ([agentbus, "hook", "opencode", "idle", "--wait", "0"], {"sessionID": "s1"}),
    ):  # fmt: skip
        process = await asyncio.create_subprocess_exec(
            *argv, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )  # fmt: skip
        out, _ = await asyncio.wait_for(process.communicate(json.dumps(stdin).encode()), 60)
        assert process.returncode == 0, (argv, out)
        assert out.strip() == b"", (argv, out)  # nothing arrived: nothing to hand back
    stored = {json.loads(bytes(r["body"]))["harness"] for r in alice.query(
        "SELECT body FROM usage_local")}  # fmt: skip
    assert stored == {"gemini", "codex", "opencode"}


async def test_gemini_connects_to_our_server(pair: World, folders: tuple[Path, Path]) -> None:
    home, project = folders
    env = home_env(pair.alice, home)
    await install(pair.alice, env, project, "gemini", "--project", str(project))
    # Gemini CLI starts a project's MCP servers only in a folder the user trusts
    (home / ".gemini").mkdir(exist_ok=True)
    trusted = {str(project): "TRUST_FOLDER"}
    (home / ".gemini" / "trustedFolders.json").write_text(json.dumps(trusted))
    listed = await run([str(harness_cli("gemini")), "mcp", "list"], env, project)
    assert "Connected" in line_of(listed), listed
    settings = json.loads((project / ".gemini" / "settings.json").read_text())
    assert "hook gemini after-agent" in json.dumps(settings["hooks"]["AfterAgent"])


async def test_opencode_connects_to_our_server(pair: World, folders: tuple[Path, Path]) -> None:
    home, project = folders
    env = home_env(pair.alice, home)
    await install(pair.alice, env, project, "opencode", "--project", str(project))
    listed = await run([str(harness_cli("opencode")), "mcp", "list"], env, project)
    assert "connected" in line_of(listed), listed
    assert "session.idle" in (project / ".opencode" / "plugins" / "agentbus.js").read_text()
    again = await install(pair.alice, env, project, "opencode")
    assert [f["outcome"] for f in again["files"]] == ["unchanged", "unchanged"]
    await run([str(BIN / "agentbus"), "uninstall", "opencode"], env, project)
    assert not (project / ".opencode" / "plugins" / "agentbus.js").exists()
    left = json.loads((project / "opencode.json").read_text())  # opencode may add its $schema
    assert "agentbus" not in left.get("mcp", {}), left
