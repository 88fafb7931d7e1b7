"""``agentbus-gateway admin policies``: a tenant's Cedar policies from the operator's side, the
same actions as ``/v1/policies`` (docs/agentbus/policies.md). Policy text comes from a file
(``-`` for standard input). A running gateway sees a change within a second.
"""

from __future__ import annotations

import json
import sys
import uuid
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape

from agentbus.admin_cli import JsonFlag, TenantOpt, _id, _run, _show, console, public
from agentbus.ids import format_id
from agentbus.policies import actions
from agentbus.policies.model import SCHEMA

app = typer.Typer(help="Cedar policies of a tenant.", no_args_is_help=True)
FileOpt = Annotated[Path, typer.Option("--file", help="Cedar policy text ('-': standard input).")]
PolicyArg = Annotated[str, typer.Argument(help="Policy id (pol_...), any of its versions.")]
WorkspaceOpt = Annotated[
    str | None, typer.Option("--workspace", help="Only for agents of this workspace (ws_...).")
]
COLUMNS = ["id", "name", "workspace_id", "version", "enabled", "created_at"]


def _text(path: Path) -> str:
    return sys.stdin.read() if str(path) == "-" else path.read_text()


def _ws(text: str | None) -> uuid.UUID | None:
    return None if text is None else _id("ws", text, "--workspace")


@app.command("schema")
def schema() -> None:
    """The Cedar schema every policy is validated against."""
    typer.echo(SCHEMA.strip())


@app.command("list")
def list_policies(ctx: typer.Context, tenant: TenantOpt, as_json: JsonFlag = False) -> None:
    """The newest version of each policy."""
    tid = _id("ten", tenant, "--tenant")
    rows = _run(ctx, lambda c: actions.list_policies(c, tid))
    _show(rows, "pol", [*COLUMNS, "versions"], as_json)


@app.command("show")
def show(ctx: typer.Context, tenant: TenantOpt, policy: PolicyArg) -> None:
    """A policy version's text and every version of its policy."""
    tid, pid = _id("ten", tenant, "--tenant"), _id("pol", policy, "POLICY")
    row, versions = _run(ctx, lambda c: actions.get_policy(c, tid, pid))
    shown = public(row, "pol")
    console.print(f"{shown['id']} {escape(row['name'])} version {row['version']}"
                  f" ({'enabled' if row['enabled'] else 'disabled'})")  # fmt: skip
    typer.echo(row["cedar"])
    _show(versions, "pol", COLUMNS, False)


@app.command("create")
def create(
    ctx: typer.Context, tenant: TenantOpt, name: str, file: FileOpt, workspace: WorkspaceOpt = None
) -> None:
    """Version 1 of a new policy, enabled (AB-4003 when it fails the schema)."""
    tid, cedar = _id("ten", tenant, "--tenant"), _text(file)
    row = _run(ctx, lambda c: actions.create_policy(c, tid, name=name, cedar=cedar,
                                                    workspace_id=_ws(workspace)))  # fmt: skip
    console.print(f"created policy {format_id('pol', row['id'])} ({escape(name)}, version 1)")


@app.command("version")
def version(ctx: typer.Context, tenant: TenantOpt, policy: PolicyArg, file: FileOpt) -> None:
    """Version n+1 of a policy, enabled."""
    tid, pid, cedar = _id("ten", tenant, "--tenant"), _id("pol", policy, "POLICY"), _text(file)
    row = _run(ctx, lambda c: actions.add_version(c, tid, pid, cedar))
    console.print(f"policy {escape(row['name'])} is at version {row['version']}"
                  f" ({format_id('pol', row['id'])})")  # fmt: skip


def _enable(ctx: typer.Context, tenant: str, policy: str, enabled: bool) -> None:
    tid, pid = _id("ten", tenant, "--tenant"), _id("pol", policy, "POLICY")
    row = _run(ctx, lambda c: actions.set_enabled(c, tid, pid, enabled))
    state = "enabled" if enabled else "disabled"
    console.print(f"policy {escape(row['name'])} version {row['version']} {state}")


@app.command("enable")
def enable(ctx: typer.Context, tenant: TenantOpt, policy: PolicyArg) -> None:
    """Enable a policy's newest version."""
    _enable(ctx, tenant, policy, True)


@app.command("disable")
def disable(ctx: typer.Context, tenant: TenantOpt, policy: PolicyArg) -> None:
    """Disable a policy's newest version."""
    _enable(ctx, tenant, policy, False)


@app.command("dry-run")
def dry_run(
    ctx: typer.Context,
    tenant: TenantOpt,
    file: FileOpt,
    name: Annotated[str, typer.Option(help="The policy the draft is a version of.")] = "draft",
    workspace: WorkspaceOpt = None,
    last: Annotated[int, typer.Option(min=1, max=actions.DRY_RUN_MAX,
                                      help="How many recent messages to replay.")] = 100,
    as_json: JsonFlag = False,
) -> None:  # fmt: skip
    """Replay the last messages against the policies with the draft; list what it would refuse."""
    tid, cedar = _id("ten", tenant, "--tenant"), _text(file)
    replayed, refused = _run(ctx, lambda c: actions.dry_run(
        c, tid, cedar=cedar, name=name, workspace_id=_ws(workspace), last=last))  # fmt: skip
    rows: list[dict[str, Any]] = [
        {"msg_id": format_id("msg", r.message["id"]), "type": r.message["type"],
         "action": r.action, "policy": r.decision.policy_name or "", "reason": r.decision.reason}
        for r in refused
    ]  # fmt: skip
    if as_json:
        typer.echo(json.dumps({"replayed": replayed, "refused": rows}, indent=2))
        return
    console.print(f"replayed {replayed} messages; the draft set would refuse {len(rows)}")
    if rows:
        _show(rows, "msg", ["msg_id", "type", "action", "policy", "reason"], False)
