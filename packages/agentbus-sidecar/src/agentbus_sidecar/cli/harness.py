"""``agentbus install``, ``agentbus uninstall`` and ``agentbus hook``: a coding harness's MCP
entry and hooks (08-HARNESS-ADAPTERS.md)."""

from __future__ import annotations

import json
import sys
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


@hook_app.command(name="claude-code")
def claude_code_hook(
    ctx: typer.Context,
    event: Annotated[str, typer.Argument(help="stop")],
    wait: Annotated[int, typer.Option("--wait", min=0, max=3600)] = IDLE_WAIT_S,
) -> None:
    """Run by Claude Code as a hook (its input on stdin).

    On `stop`, hand back new messages, or hold the idle session up to --wait seconds for one."""
    from agentbus_sidecar.adapters.claude import stop_hook

    if event != "stop":
        raise typer.BadParameter("stop", param_hint="EVENT")
    where = paths(ctx)
    raw = sys.stdin.read()
    payload = json.loads(raw) if raw.strip() else {}
    with guarded(False):
        creds = load_credentials(where.credentials)
        if not creds.agent_id:
            raise ConfigError("this agent is not registered yet; run `agentbus register`")
        conn = open_store(state_db_path(creds.agent_id, where.state_dir))
        try:
            answer = run(stop_hook(conn, payload, wait))
        finally:
            conn.close()
    if answer is not None:
        sys.stdout.write(json.dumps(answer) + "\n")
