"""``strataplane audit-sinks ...``: where the tenant's audit chain is streamed, over the HTTP
API (logged in as for ``cs``). A webhook credential is read from standard input."""

from __future__ import annotations

import json
import sys
from typing import Annotated, Any

import typer
from rich.table import Table

from strataplane.cli_spec import client, e, out

sinks_app = typer.Typer(help="Audit sinks: webhooks and syslog.", no_args_is_help=True)


@sinks_app.command("list")
def sinks_list(ctx: typer.Context) -> None:
    """Each sink with its cursor, backlog and last error."""
    table = Table("id", "kind", "target", "cursor", "backlog", "last error")
    for s in client(ctx).get("/audit-sinks"):
        target = s["config"].get("url") or s["config"].get("address", "")
        table.add_row(
            e(s["id"]),
            e(s["kind"]),
            e(target),
            str(s["cursor_seq"]),
            str(s["backlog"]),
            e(s["last_error"] or ""),
        )
    out.print(table)


@sinks_app.command("add")
def sinks_add(
    ctx: typer.Context,
    kind: Annotated[str, typer.Argument(help="webhook or syslog.")],
    target: Annotated[str, typer.Argument(help="The webhook URL, or syslog HOST:PORT.")],
    transport: Annotated[str, typer.Option(help="syslog: udp or tcp.")] = "udp",
    credential_stdin: Annotated[
        bool, typer.Option(help="webhook: read the Authorization value from standard input.")
    ] = False,
    start: Annotated[
        int | None, typer.Option(help="First seq to export (default: only new events).", min=1)
    ] = None,
) -> None:
    """Stream the audit chain to a webhook or a syslog server."""
    config: dict[str, Any] = (
        {"url": target} if kind == "webhook" else {"address": target, "transport": transport}
    )
    body: dict[str, Any] = {"kind": kind, "config": config}
    if credential_stdin:
        body["credential"] = sys.stdin.read().strip()
    if start is not None:
        body["start"] = start
    made = client(ctx).call("POST", "/audit-sinks", body=body).json()
    out.print(f"[green]audit sink[/] {e(made['id'])} from seq {made['cursor_seq'] + 1}")


@sinks_app.command("show")
def sinks_show(
    ctx: typer.Context, sink_id: Annotated[str, typer.Argument(help="The sink's id.")]
) -> None:
    """One sink, as JSON (the credential is never shown)."""
    out.print(e(json.dumps(client(ctx).get(f"/audit-sinks/{sink_id}"), indent=2)))


@sinks_app.command("remove")
def sinks_remove(
    ctx: typer.Context, sink_id: Annotated[str, typer.Argument(help="The sink's id.")]
) -> None:
    """Stop streaming to a sink and forget its credential."""
    client(ctx).call("DELETE", f"/audit-sinks/{sink_id}")
    out.print(f"removed {e(sink_id)}")


def register(app: typer.Typer) -> None:
    app.add_typer(sinks_app, name="audit-sinks")
