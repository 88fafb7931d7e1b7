"""``agentbus trace``, ``doctor`` and ``sidecar run``."""

from __future__ import annotations

import asyncio
import signal
from typing import TYPE_CHECKING, Annotated, Any

import typer

from agentbus_sidecar.actions.tracing import trace_message
from agentbus_sidecar.cli.app import app, sidecar_app
from agentbus_sidecar.cli.common import EXIT_FAILED, JsonFlag, console, emit, guarded, paths, run
from agentbus_sidecar.cli.render import trace_event_text
from agentbus_sidecar.clock import format_ts, utcnow
from agentbus_sidecar.doctor import run_checks
from agentbus_sidecar.runtime import open_runtime
from agentbus_sidecar.store import state_db_path
from agentbus_sidecar.sync import DELIVERIES, PUSH, hold_run_lock, sync_once
from agentbus_sidecar.sync import run as run_loop

if TYPE_CHECKING:
    from rich.console import Console

PANEL = "Diagnostics"


@app.command(rich_help_panel=PANEL)
def trace(
    ctx: typer.Context,
    ident: Annotated[str, typer.Argument(help="msg_ or rcp_ id")],
    as_json: JsonFlag = False,
) -> None:
    """Where a message is: the local half from state.db, the rest from the gateway."""

    async def act() -> dict[str, Any]:
        async with open_runtime(paths(ctx).credentials, paths(ctx).state_dir) as rt:
            return await trace_message(rt, ident)

    with guarded(as_json):
        result = run(act())

    def human(out: Console) -> None:
        local, remote = result["local"], result["remote"]
        if local:
            where = local.get("receipt") or ("outbox" if local.get("outbox") else "inbox")
            out.print(f"local ({where}):")
            for event in local["events"]:
                detail = f"  {event['detail']}" if event.get("detail") else ""
                out.print(f"  {event['at']}  {event['event']}{detail}", markup=False)
        if remote:
            message = remote.get("message") or {}
            out.print(f"gateway ({remote.get('source', '?')}): status {message.get('status')}")
            for event in remote.get("events", []):
                out.print(f"  {event.get('at')}  {trace_event_text(event)}", markup=False)
        if result["offline"]:
            out.print(f"[yellow]gateway half unavailable:[/] {result['offline']}")

    emit(as_json, result, human)


@app.command(rich_help_panel=PANEL)
def doctor(ctx: typer.Context, as_json: JsonFlag = False) -> None:
    """Check credentials, key, state.db and the gateway (reachability, clock skew)."""
    where = paths(ctx)
    checks = run(run_checks(where.credentials, where.state_dir))
    worst = "fail" if any(c.status == "fail" for c in checks) else "ok"

    def human(out: Console) -> None:
        colours = {"ok": "green", "warn": "yellow", "fail": "red"}
        for check in checks:
            out.print(f"[{colours[check.status]}]{check.status:>4}[/] {check.name:<18} ", end="")
            out.print(check.detail, markup=False)

    emit(as_json, {"status": worst, "checks": [c.as_dict() for c in checks]}, human)
    if worst == "fail":
        raise typer.Exit(EXIT_FAILED)


@sidecar_app.command(name="run")
def sidecar_run(
    ctx: typer.Context,
    wait: Annotated[int, typer.Option("--wait", min=0, max=30, help="Long-poll seconds.")] = 25,
    delivery: Annotated[
        str,
        typer.Option(
            "--delivery",
            help="websocket: pushed, with the status of sent messages (long-polled when the "
            "gateway does not upgrade); or long-poll.",
        ),
    ] = PUSH,
    once: Annotated[bool, typer.Option("--once", help="One flush and pull, then exit.")] = False,
    as_json: JsonFlag = False,
) -> None:
    """Keep the outbox flushed and the inbox filled until interrupted."""
    if delivery not in DELIVERIES:
        raise typer.BadParameter(f"one of {', '.join(DELIVERIES)}", param_hint="--delivery")
    out = console(stderr=True)

    def log(line: str) -> None:
        out.print(f"{format_ts(utcnow())} {line}", markup=False)

    async def act() -> Any:
        async with open_runtime(paths(ctx).credentials, paths(ctx).state_dir) as rt:
            with hold_run_lock(state_db_path(rt.agent_id, paths(ctx).state_dir)):
                if once:
                    return await sync_once(rt, wait_s=wait)
                stop = asyncio.Event()
                loop = asyncio.get_running_loop()
                for sig in (signal.SIGINT, signal.SIGTERM):
                    loop.add_signal_handler(sig, stop.set)
                log(f"sidecar for {rt.address} running against {rt.creds.gateway_url}")
                await run_loop(rt, stop, wait_s=wait, delivery=delivery, log=log)
                log("stopped")
                return None

    with guarded(as_json):
        report = run(act())
    if report is not None:
        data = {
            "sent": report.flush.sent,
            "failed": report.flush.failed,
            "received": dict(report.received),
            "expired": report.expired,
            "offline": report.flush.unreachable,
        }
        emit(as_json, data, lambda c: c.print(data, markup=False))
