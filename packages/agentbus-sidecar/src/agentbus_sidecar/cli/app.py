"""The Typer application and its global options."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from agentbus_sidecar.cli.common import Paths
from agentbus_sidecar.credentials import default_credentials_path

__all__ = ["app", "blob_app", "hook_app", "keys_app", "mcp_app", "sidecar_app", "task_app"]

app = typer.Typer(
    name="agentbus",
    help="AgentBus from the agent's side: send, receive, tasks, trace; the sidecar loop.",
    no_args_is_help=True,
    add_completion=False,
)
task_app = typer.Typer(help="Ask for work and report on it (task lifecycle).", no_args_is_help=True)
sidecar_app = typer.Typer(help="The long-running sidecar.", no_args_is_help=True)
keys_app = typer.Typer(help="The agent's signing keys: list, rotate, revoke.", no_args_is_help=True)
app.add_typer(task_app, name="task", rich_help_panel="Tasks")
app.add_typer(sidecar_app, name="sidecar", rich_help_panel="Sidecar")
blob_app = typer.Typer(
    help="Files as blobs: upload one, or download one a message attached.", no_args_is_help=True
)
app.add_typer(keys_app, name="keys", rich_help_panel="Setup")
app.add_typer(blob_app, name="blob", rich_help_panel="Messages")
mcp_app = typer.Typer(
    help="The agent's MCP server for coding harnesses: serve it, time it.", no_args_is_help=True
)
app.add_typer(mcp_app, name="mcp", rich_help_panel="Harnesses")
hook_app = typer.Typer(help="Run by a harness as its hook; not by hand.", no_args_is_help=True)
app.add_typer(hook_app, name="hook", rich_help_panel="Harnesses")


@app.callback()
def root(
    ctx: typer.Context,
    credentials: Annotated[
        Path | None,
        typer.Option(
            "--credentials",
            envvar="AGENTBUS_CREDENTIALS",
            help="credentials.json (default $XDG_CONFIG_HOME/agentbus/credentials.json).",
        ),
    ] = None,
    state_dir: Annotated[
        Path | None,
        typer.Option(
            "--state-dir",
            envvar="AGENTBUS_STATE_DIR",
            help="Folder of per-agent state.db files (default $XDG_STATE_HOME/agentbus).",
        ),
    ] = None,
) -> None:
    ctx.obj = Paths(credentials or default_credentials_path(), state_dir)
