"""``agentbus send``, ``inbox``, ``read``, ``ack``, ``reply``, ``wait-reply`` and ``outbox``."""

from __future__ import annotations

from collections import Counter
from datetime import timedelta
from typing import TYPE_CHECKING, Annotated, Any

import typer

from agentbus_sidecar.actions.reply_wait import wait_for_reply
from agentbus_sidecar.actions.sending import ack_messages, reply_message, send_message
from agentbus_sidecar.addresses import normalize_input
from agentbus_sidecar.attachments import upload_files
from agentbus_sidecar.cli.app import app
from agentbus_sidecar.cli.common import (
    EXIT_FAILED,
    EXIT_TIMED_OUT,
    Attach,
    JsonFlag,
    WaitTimeout,
    emit,
    fail,
    guarded,
    paths,
    read_text_arg,
    run,
)
from agentbus_sidecar.cli.render import inbox_item, print_inbox, show_envelope, show_outcome
from agentbus_sidecar.clock import server_now, utcnow
from agentbus_sidecar.errors import EnvelopeError, GatewayError, GatewayUnreachable
from agentbus_sidecar.resync import request_resync, resync_if_pending
from agentbus_sidecar.runtime import open_runtime
from agentbus_sidecar.store import inbox, outbox, state_db_path
from agentbus_sidecar.sync import run_lock_held, sync_once

if TYPE_CHECKING:
    from rich.console import Console

Title = Annotated[str | None, typer.Option("--title", help="A title (first message sets it).")]
Format = Annotated[str | None, typer.Option("--format", help="plain or markdown")]
Text = Annotated[str | None, typer.Argument(help="Text; `-` or nothing reads standard input.")]

PANEL = "Messages"


def _message_data(text: str, title: str | None, fmt: str | None) -> dict[str, Any]:
    if fmt not in (None, "plain", "markdown"):
        raise typer.BadParameter("--format is plain or markdown")
    data: dict[str, Any] = {"text": text}
    data.update({k: v for k, v in (("title", title), ("format", fmt)) if v is not None})
    return data


@app.command(rich_help_panel=PANEL)
def send(
    ctx: typer.Context,
    to: Annotated[str, typer.Argument(help="agent://<tenant>/<workspace>/<name>")],
    text: Text = None,
    title: Title = None,
    fmt: Format = None,
    conversation: Annotated[str | None, typer.Option("--conversation", help="cnv_ id")] = None,
    expires_in: Annotated[int | None, typer.Option("--expires-in", help="Seconds.")] = None,
    priority: Annotated[str, typer.Option("--priority", help="low, normal or high")] = "normal",
    attach: Attach = None,
    as_json: JsonFlag = False,
) -> None:
    """Send a message; offline it is queued and sent later.

    With --attach the message goes once its files are uploaded."""
    data = _message_data(read_text_arg(text), title, fmt)
    expires = server_now() + timedelta(seconds=expires_in) if expires_in else None

    async def act() -> Any:
        async with open_runtime(paths(ctx).credentials, paths(ctx).state_dir) as rt:
            if attach:
                data["attachments"] = await upload_files(rt, attach)
            return await send_message(
                rt,
                normalize_input(to),
                data,
                conversation=conversation,
                priority=priority,
                expires=expires,
            )

    with guarded(as_json):
        try:
            outcome = run(act())
        except ValueError as exc:
            raise EnvelopeError(str(exc)) from exc
    show_outcome(as_json, outcome)


@app.command(name="inbox", rich_help_panel=PANEL)
def inbox_command(
    ctx: typer.Context,
    show_all: Annotated[bool, typer.Option("--all", help="Include messages already read.")] = False,
    sync: Annotated[
        bool, typer.Option("--sync/--no-sync", help="Fetch from the gateway first.")
    ] = True,
    wait: Annotated[int, typer.Option("--wait", min=0, max=30, help="Long-poll seconds.")] = 0,
    resync_first: Annotated[
        bool,
        typer.Option(
            "--resync", help="First restore delivered, unread messages a lost state.db held."
        ),
    ] = False,
    as_json: JsonFlag = False,
) -> None:
    """List messages: new ones are presented (marked *) until read or acked."""
    restored: list[tuple[str, str]] = []

    async def act() -> tuple[list[dict[str, Any]], str | None, str | None]:
        note = unavailable = None
        async with open_runtime(paths(ctx).credentials, paths(ctx).state_dir) as rt:
            if resync_first:
                request_resync(rt)
            if sync:
                loop_runs = run_lock_held(state_db_path(rt.agent_id, paths(ctx).state_dir))
                try:
                    report = await sync_once(rt, wait_s=wait, receive=not loop_runs)
                    note = report.flush.unreachable
                    restored.extend(report.restored)
                except GatewayError as exc:
                    if not exc.retryable:
                        raise  # an answer, not offline: retrying the same request cannot help
                    unavailable = str(exc)
                except GatewayUnreachable as exc:
                    note = str(exc)  # only a network failure is offline
            elif resync_first:
                restored.extend(await resync_if_pending(rt))
            inbox.present(rt.conn, utcnow())
            rows = inbox.list_messages(rt.conn, include_read=show_all)
            return [inbox_item(row) for row in rows], note, unavailable

    with guarded(as_json):
        items, note, unavailable = run(act())

    def human(out: Console) -> None:
        if restored:
            counts = Counter(outcome for _, outcome in restored)
            out.print("resync: " + ", ".join(f"{n} {what}" for what, n in sorted(counts.items())))
        if note:
            out.print("[yellow]offline:[/] ", end="")
            out.print(f"{note}; showing the local inbox", markup=False)
        if unavailable:
            out.print("[yellow]gateway unavailable:[/] ", end="")
            out.print(f"{unavailable}; showing the local inbox", markup=False)
        if items:
            print_inbox(out, items)
        else:
            out.print("no messages")

    data: dict[str, Any] = {"messages": items, "offline": note, "unavailable": unavailable}
    if resync_first or restored:
        data["resync"] = dict(restored)
    emit(as_json, data, human)


@app.command(name="read", rich_help_panel=PANEL)
def read_command(
    ctx: typer.Context,
    msg_id: Annotated[str, typer.Argument(help="msg_ id")],
    no_ack: Annotated[bool, typer.Option("--no-ack", help="Show without acking.")] = False,
    as_json: JsonFlag = False,
) -> None:
    """Show one message; a received one is application-acked unless --no-ack."""

    async def act() -> tuple[dict[str, Any], bool]:
        async with open_runtime(paths(ctx).credentials, paths(ctx).state_dir) as rt:
            row = inbox.get(rt.conn, msg_id)
            if row is not None and row["transport_acked"]:
                acked = False if no_ack else (await ack_messages(rt, [msg_id]))[msg_id]
                return inbox.envelope_of(row), acked
            if row is not None:
                raise GatewayUnreachable(rt.creds.gateway_url, "its transport ack is still pending")
            if (queued := outbox.queued_envelope(rt.conn, msg_id)) is not None:
                return queued, False
            remote = await rt.session.call(rt.client.get_message, msg_id, True)
            return remote.get("envelope") or remote, False

    with guarded(as_json):
        envelope, acked = run(act())

    def human(out: Console) -> None:
        show_envelope(out, envelope)
        if acked:
            out.print("\n(marked read)")

    emit(as_json, {"envelope": envelope, "acked": acked}, human)


@app.command(rich_help_panel=PANEL)
def ack(
    ctx: typer.Context,
    msg_ids: Annotated[list[str], typer.Argument(help="msg_ ids to mark read")],
    as_json: JsonFlag = False,
) -> None:
    """Application-ack messages: the agent has read or handled them."""

    async def act() -> dict[str, bool]:
        async with open_runtime(paths(ctx).credentials, paths(ctx).state_dir) as rt:
            return await ack_messages(rt, msg_ids)

    with guarded(as_json):
        done = run(act())
    missing = [m for m, ok in done.items() if not ok]

    def human(out: Console) -> None:
        for msg_id, ok in done.items():
            out.print(f"{msg_id} {'acked' if ok else 'not in the inbox, or already read'}")

    emit(as_json, {"acked": done}, human)
    if missing:
        raise typer.Exit(EXIT_FAILED)


@app.command(rich_help_panel=PANEL)
def reply(
    ctx: typer.Context,
    msg_id: Annotated[str, typer.Argument(help="msg_ id to answer")],
    text: Text = None,
    title: Title = None,
    fmt: Format = None,
    as_json: JsonFlag = False,
) -> None:
    """Answer a message in its conversation (to its replyto, else its sender)."""
    data = _message_data(read_text_arg(text), title, fmt)

    async def act() -> Any:
        async with open_runtime(paths(ctx).credentials, paths(ctx).state_dir) as rt:
            return await reply_message(rt, msg_id, data)

    with guarded(as_json):
        outcome = run(act())
    show_outcome(as_json, outcome)


@app.command(name="wait-reply", rich_help_panel=PANEL)
def wait_reply(
    ctx: typer.Context,
    msg_id: Annotated[str, typer.Argument(help="msg_ id of the message sent")],
    timeout: WaitTimeout = 600,
    no_ack: Annotated[bool, typer.Option("--no-ack", help="Show without acking.")] = False,
    as_json: JsonFlag = False,
) -> None:
    """Wait for the answer to a message and show it (acked unless --no-ack).

    Exit 6 when the time runs out."""

    async def act() -> tuple[dict[str, Any] | None, bool, float, str | None]:
        async with open_runtime(paths(ctx).credentials, paths(ctx).state_dir) as rt:
            state_db = state_db_path(rt.agent_id, paths(ctx).state_dir)
            found = await wait_for_reply(rt, msg_id, timeout, state_db)
            envelope = found.envelope
            if envelope is None or no_ack:
                return envelope, False, found.waited_s, found.detail
            acked = (await ack_messages(rt, [envelope["id"]]))[envelope["id"]]
            return envelope, acked, found.waited_s, found.detail

    with guarded(as_json):
        envelope, acked, waited_s, detail = run(act())
    answer = {"in_reply_to": msg_id, "envelope": envelope, "acked": acked,
              "waited_s": round(waited_s, 3), "detail": detail}  # fmt: skip

    def human(out: Console) -> None:
        if envelope is None:
            why = f" ({detail})" if detail else ""
            out.print(f"no answer to {msg_id} after {timeout} s{why}", markup=False)
            return
        show_envelope(out, envelope)
        if acked:
            out.print("\n(marked read)")

    emit(as_json, answer, human)
    if envelope is None:
        raise typer.Exit(EXIT_TIMED_OUT)


@app.command(name="outbox", rich_help_panel=PANEL)
def outbox_command(
    ctx: typer.Context,
    drop: Annotated[str | None, typer.Option("--drop", help="Delete a failed send by id.")] = None,
    as_json: JsonFlag = False,
) -> None:
    """What waits for the gateway, and sends it refused for good."""

    async def act() -> list[dict[str, Any]]:
        async with open_runtime(paths(ctx).credentials, paths(ctx).state_dir) as rt:
            if drop is not None:
                if outbox.queued_envelope(rt.conn, drop) is None:
                    fail(f"no queued send {drop}", EXIT_FAILED, as_json, code="outbox.not_found")
                outbox.delete(rt.conn, drop)
            return [
                {
                    "id": r["id"],
                    "kind": r["kind"],
                    "attempts": r["attempts"],
                    "created_at": r["created_at"],
                    "last_error": r["last_error"],
                    "state": "failed" if r["next_attempt_at"] == outbox.PARKED else "queued",
                    "next_attempt_at": None
                    if r["next_attempt_at"] == outbox.PARKED
                    else r["next_attempt_at"],
                }
                for r in outbox.rows(rt.conn)
            ]

    with guarded(as_json):
        items = run(act())

    def human(out: Console) -> None:
        if not items:
            out.print("outbox empty")
        for item in items:
            when = item["next_attempt_at"] or "never (failed)"
            out.print(
                f"{item['id']} {item['kind']} {item['state']}, {item['attempts']} tries, "
                f"next {when}" + (f": {item['last_error']}" if item["last_error"] else "")
            )

    emit(as_json, {"outbox": items}, human)
