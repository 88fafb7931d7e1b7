"""Where each harness keeps its MCP servers (and hooks), in its own format, and the entries
``agentbus install`` puts there. Every entry starts the same command: this installation's
``agentbus`` by absolute path, with the agent's credentials file (and state folder) named on
the command line, so nothing depends on the harness's environment or PATH.

- claude-code: --project DIR (default .): DIR/.mcp.json ``mcpServers``, and in
  DIR/.claude/settings.local.json the server approved (``enabledMcpjsonServers``) and the Stop
  hook; --user: ~/.claude.json ``mcpServers`` and the Stop hook in ~/.claude/settings.json
- codex: DIR/.codex/config.toml ``[mcp_servers.agentbus]`` (read in trusted projects), and
  ``notify`` (the usage hook) unless another program holds it; --user: $CODEX_HOME/config.toml
  (~/.codex)
- gemini: DIR/.gemini/settings.json ``mcpServers`` and the AfterAgent hook; --user:
  ~/.gemini/settings.json
- opencode: DIR/opencode.json ``mcp`` and the plugin DIR/.opencode/plugins/agentbus.js; --user:
  $XDG_CONFIG_HOME/opencode/opencode.json and plugins/agentbus.js beside it
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentbus_sidecar.adapters.edits import Claim, Edit, ListItem, Put
from agentbus_sidecar.adapters.opencode_plugin import plugin_source

__all__ = ["HARNESSES", "SERVER_NAME", "ConfigFile", "Harness", "ServerCommand", "harness_named"]

SERVER_NAME = "agentbus"
# Tool calls that wait (inbox wait_s, wait_reply, task_wait) last up to 600 s.
TOOL_TIMEOUT_S = 620
STARTUP_TIMEOUT_S = 30
# How long the Claude Code Stop hook holds an idle session for a message, by default.
IDLE_WAIT_S = 600
STOP_HOOK = ("hook", "claude-code", "stop")
GEMINI_HOOK = ("hook", "gemini", "after-agent")
CODEX_NOTIFY = ("hook", "codex", "notify")


@dataclass(frozen=True)
class ServerCommand:
    """``agentbus --credentials C [--state-dir S]`` and what follows."""

    agentbus: str
    credentials: Path
    state_dir: Path | None

    def argv(self, *rest: str) -> list[str]:
        head = ["--credentials", str(self.credentials)]
        if self.state_dir is not None:
            head += ["--state-dir", str(self.state_dir)]
        return [*head, *rest]

    def shell(self, *rest: str) -> str:
        return shlex.join([self.agentbus, *self.argv(*rest)])


@dataclass(frozen=True)
class ConfigFile:
    path: Path
    fmt: str  # json, toml, or text: a file wholly ours with ``content``
    edits: list[Edit]
    content: str | None = None


def _runs(hook_argv: tuple[str, ...]) -> Callable[[Any], bool]:
    """A hook group that runs our hook command (whatever its options)."""
    marker = " ".join(hook_argv)

    def ours(group: Any) -> bool:
        return isinstance(group, dict) and any(
            isinstance(hook, dict) and marker in str(hook.get("command", ""))
            for hook in group.get("hooks") or []
        )

    return ours


_is_stop_hook = _runs(STOP_HOOK)


def _claude(cmd: ServerCommand, project: Path | None, home: Path, wait_s: int) -> list[ConfigFile]:
    # alwaysLoad: a session waits for the server to connect before its first model request
    # (`claude -p` otherwise sends it at once, without our tools)
    server = {
        "type": "stdio",
        "command": cmd.agentbus,
        "args": cmd.argv("mcp", "serve"),
        "alwaysLoad": True,
    }
    hook = {
        "hooks": [
            {
                "type": "command",
                "command": cmd.shell(*STOP_HOOK, "--wait", str(wait_s)),
                "timeout": wait_s + 30,
            }
        ]
    }
    stop = ListItem(("hooks", "Stop"), hook, _is_stop_hook)
    if project is None:
        return [
            ConfigFile(home / ".claude.json", "json", [Put(("mcpServers", SERVER_NAME), server)]),
            ConfigFile(home / ".claude" / "settings.json", "json", [stop]),
        ]
    approve = ListItem(("enabledMcpjsonServers",), SERVER_NAME, lambda item: item == SERVER_NAME)
    return [
        ConfigFile(project / ".mcp.json", "json", [Put(("mcpServers", SERVER_NAME), server)]),
        ConfigFile(project / ".claude" / "settings.local.json", "json", [approve, stop]),
    ]


def _codex(cmd: ServerCommand, project: Path | None, home: Path, wait_s: int) -> list[ConfigFile]:
    server = {
        "command": cmd.agentbus,
        "args": cmd.argv("mcp", "serve"),
        "startup_timeout_sec": STARTUP_TIMEOUT_S,
        "tool_timeout_sec": TOOL_TIMEOUT_S,
    }
    if project is not None:
        folder = project / ".codex"
    else:
        folder = Path(os.environ.get("CODEX_HOME") or home / ".codex")
    notify = Claim(
        ("notify",), [cmd.agentbus, *cmd.argv(*CODEX_NOTIFY)],
        lambda held: isinstance(held, list) and " ".join(CODEX_NOTIFY) in " ".join(map(str, held)),
    )  # fmt: skip
    edits: list[Edit] = [notify, Put(("mcp_servers", SERVER_NAME), server)]
    return [ConfigFile(folder / "config.toml", "toml", edits)]


def _gemini(cmd: ServerCommand, project: Path | None, home: Path, wait_s: int) -> list[ConfigFile]:
    # ``timeout`` (ms) bounds the connection check of `gemini mcp list` too, 5 s by default:
    # too short for a Python server to start on a busy machine.
    server = {
        "command": cmd.agentbus,
        "args": cmd.argv("mcp", "serve"),
        "timeout": TOOL_TIMEOUT_S * 1000,
    }
    folder = (project or home) / ".gemini"
    hook = {"hooks": [{"type": "command", "command": cmd.shell(*GEMINI_HOOK, "--wait", str(wait_s)),
                       "timeout": (wait_s + 30) * 1000}]}  # fmt: skip
    edits: list[Edit] = [
        Put(("mcpServers", SERVER_NAME), server),
        ListItem(("hooks", "AfterAgent"), hook, _runs(GEMINI_HOOK)),
    ]
    return [ConfigFile(folder / "settings.json", "json", edits)]


def _opencode(
    cmd: ServerCommand, project: Path | None, home: Path, wait_s: int
) -> list[ConfigFile]:
    server = {
        "type": "local",
        "command": [cmd.agentbus, *cmd.argv("mcp", "serve")],
        "enabled": True,
        "timeout": STARTUP_TIMEOUT_S * 1000,
    }
    if project is not None:
        path, plugins = project / "opencode.json", project / ".opencode" / "plugins"
    else:
        config = Path(os.environ.get("XDG_CONFIG_HOME") or home / ".config")
        path = config / "opencode" / "opencode.json"
        plugins = config / "opencode" / "plugins"
    plugin = plugin_source([cmd.agentbus, *cmd.argv()], wait_s)
    return [
        ConfigFile(path, "json", [Put(("mcp", SERVER_NAME), server)]),
        ConfigFile(plugins / "agentbus.js", "text", [], content=plugin),
    ]


@dataclass(frozen=True)
class Harness:
    name: str  # as `agentbus install` takes it
    registered_as: str  # the agents.harness value (data model §1.5)
    files: Callable[[ServerCommand, Path | None, Path, int], list[ConfigFile]]


HARNESSES = (
    Harness("claude-code", "claude", _claude),
    Harness("codex", "codex", _codex),
    Harness("gemini", "gemini", _gemini),
    Harness("opencode", "opencode", _opencode),
)


def harness_named(name: str) -> Harness:
    for harness in HARNESSES:
        if harness.name == name:
            return harness
    raise ValueError(f"harness is one of {', '.join(h.name for h in HARNESSES)}, not {name!r}")
