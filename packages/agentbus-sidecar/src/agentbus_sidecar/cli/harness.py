"""``agentbus install``, ``agentbus uninstall`` and ``agentbus hook``: a coding harness's MCP
entry and hooks (08-HARNESS-ADAPTERS.md)."""

from __future__ import annotations

import json
import os
import sqlite3
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from agentbus_sidecar.adapters.harnesses import HARNESSES, IDLE_WAIT_S
from agentbus_sidecar.adapters.install import FileChange, install, uninstall
from agentbus_sidecar.cli.app import app, hook_app
from agentbus_sidecar.cli.common import JsonFlag, emit, guarded, paths, run
from agentbus_sidecar.credentials import load_credentials
from agentbus_sidecar.errors import ConfigError
from agentbus_sidecar.store import open_store, state_db_path

if TYPE_CHECKING:
    from rich.console import Console

PANEL = "Harnesses"
NAMES = ", ".join(h.name for h in HARNESSES)
HarnessArg = Annotated[str, typer.Argument(help=NAMES)]
Project = Annotated[
    Path | None,
    typer.Option(
        "--project", file_okay=False, help="The project folder (default: the current one)."
    ),
]
User = Annotated[bool, typer.Option("--user", help="The harness's user-wide config instead.")]


def _scope(project: Path | None, user: bool) -> Path | None:
    if user and project is not None:
        raise typer.BadParameter("--project or --user, not both")
    return None if user else (project or Path.cwd())


def _show(as_json: bool, changes: list[FileChange], extra: dict[str, Any]) -> None:
    def human(out: Console) -> None:
        if extra.get("registered"):
            out.print(f"registered agent {extra['registered']}", markup=False)
        for change in changes:
            what = f" ({', '.join(change.entries)})" if change.entries else ""
            out.print(f"{change.outcome:<9} {change.path}{what}", markup=False)

    emit(as_json, {"files": [c.as_dict() for c in changes], **extra}, human)


@app.command(name="install", rich_help_panel=PANEL)
def install_command(
    ctx: typer.Context,
    harness: HarnessArg,
    project: Project = None,
    user: User = False,
    wait: Annotated[
        int,
        typer.Option(
            "--idle-wait",
            min=0,
            max=3600,
            help="claude-code: seconds the Stop hook holds an idle session for a message.",
        ),
    ] = IDLE_WAIT_S,
    as_json: JsonFlag = False,
) -> None:
    """Connect a harness: its MCP entry (and hooks) in its own config files.

    Registers the agent first if needed. Running it again changes nothing."""
    where = paths(ctx)
    scope = _scope(project, user)
    with guarded(as_json):
        try:
            changes, registered = run(
                install(harness, where.credentials, where.state_dir, project=scope, wait_s=wait)
            )
        except ValueError as exc:
            raise ConfigError(str(exc)) from exc
    _show(as_json, changes, {"harness": harness, "registered": registered})


@app.command(name="uninstall", rich_help_panel=PANEL)
def uninstall_command(
    ctx: typer.Context,
    harness: HarnessArg,
    project: Project = None,
    user: User = False,
    as_json: JsonFlag = False,
) -> None:
    """Take out exactly what `agentbus install` put in the harness's files."""
    where = paths(ctx)
    scope = _scope(project, user)
    with guarded(as_json):
        try:
            changes = uninstall(harness, where.credentials, where.state_dir, project=scope)
        except ValueError as exc:
            raise ConfigError(str(exc)) from exc
    _show(as_json, changes, {"harness": harness})


@contextmanager
def _agent_store(ctx: typer.Context) -> Iterator[sqlite3.Connection]:
    """The agent's state.db, for a hook (which the harness runs in its own environment)."""
    where = paths(ctx)
    creds = load_credentials(where.credentials)
    if not creds.agent_id:
        raise ConfigError("this agent is not registered yet; run `agentbus register`")
    conn = open_store(state_db_path(creds.agent_id, where.state_dir))
    try:
        yield conn
    finally:
        conn.close()


def _stdin_json() -> dict[str, Any]:
    raw = sys.stdin.read()
    try:
        payload = json.loads(raw) if raw.strip() else {}
    except ValueError as exc:
        raise ConfigError(f"the hook's input is not JSON: {exc}") from exc
    return payload if isinstance(payload, dict) else {}


Wait = Annotated[int, typer.Option("--wait", min=0, max=3600)]


@hook_app.command(name="claude-code")
def claude_code_hook(
    ctx: typer.Context,
    event: Annotated[str, typer.Argument(help="stop")],
    wait: Wait = IDLE_WAIT_S,
) -> None:
    """Run by Claude Code as a hook (its input on stdin).

    On `stop`, store the turn's usage, then hand back new messages, or hold the idle session up
    to --wait seconds for one."""
    from agentbus_sidecar.adapters.claude import stop_hook

    if event != "stop":
        raise typer.BadParameter("stop", param_hint="EVENT")
    payload = _stdin_json()
    with guarded(False), _agent_store(ctx) as conn:
        answer = run(stop_hook(conn, payload, wait))
    if answer is not None:
        sys.stdout.write(json.dumps(answer) + "\n")


@hook_app.command(name="gemini")
def gemini_hook(
    ctx: typer.Context,
    event: Annotated[str, typer.Argument(help="after-agent")],
    wait: Wait = IDLE_WAIT_S,
) -> None:
    """Run by Gemini CLI as its AfterAgent hook (its input on stdin).

    Store the turn's usage, then hand back new messages, or hold up to --wait seconds for one."""
    from agentbus_sidecar.adapters.claude import stop_hook
    from agentbus_sidecar.adapters.usage import capture_gemini_transcript

    if event != "after-agent":
        raise typer.BadParameter("after-agent", param_hint="EVENT")
    payload = _stdin_json()
    with guarded(False), _agent_store(ctx) as conn:
        hook = stop_hook(conn, payload, wait, adapter="gemini", capture=capture_gemini_transcript)
        answer = run(hook)
    if answer is not None:
        sys.stdout.write(json.dumps(answer) + "\n")


@hook_app.command(name="codex")
def codex_hook(
    ctx: typer.Context,
    event: Annotated[str, typer.Argument(help="notify")],
    notification: Annotated[str, typer.Argument(help="Codex's JSON argument")] = "{}",
) -> None:
    """Run by Codex as its `notify` program after each turn.

    Store the turn's usage from the thread's rollout file."""
    from agentbus_sidecar.adapters.usage import capture_codex_rollout

    if event != "notify":
        raise typer.BadParameter("notify", param_hint="EVENT")
    try:
        payload = json.loads(notification)
    except ValueError as exc:
        raise ConfigError(f"the notification is not JSON: {exc}") from exc
    codex_home = Path(os.environ.get("CODEX_HOME") or Path.home() / ".codex")
    with guarded(False), _agent_store(ctx) as conn:
        if isinstance(payload, dict) and payload.get("type") == "agent-turn-complete":
            capture_codex_rollout(conn, payload, codex_home)


@hook_app.command(name="opencode")
def opencode_hook(
    ctx: typer.Context,
    event: Annotated[str, typer.Argument(help="idle or usage")],
    wait: Wait = IDLE_WAIT_S,
) -> None:
    """Run by our OpenCode plugin (its input on stdin).

    `idle`: print the instruction to wake the session with, after holding up to --wait seconds
    for a message (nothing: let it rest). `usage`: store a finished assistant message's usage."""
    from agentbus_sidecar.adapters.claude import stop_hook
    from agentbus_sidecar.adapters.usage import capture_opencode_message

    if event not in ("idle", "usage"):
        raise typer.BadParameter("idle or usage", param_hint="EVENT")
    payload = _stdin_json()
    with guarded(False), _agent_store(ctx) as conn:
        if event == "usage":
            capture_opencode_message(conn, payload)
            return
        session = {"session_id": payload.get("sessionID")}
        answer = run(stop_hook(conn, session, wait, adapter="opencode", capture=lambda *_: 0))
    if answer is not None:
        sys.stdout.write(str(answer["reason"]) + "\n")
