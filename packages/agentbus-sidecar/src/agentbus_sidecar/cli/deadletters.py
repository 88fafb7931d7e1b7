"""``agentbus dead-letters`` and ``agentbus redrive``: what this agent sent that could not be
delivered, and sending it out again (04-API-SPEC.md §4.6, 05 §7.4)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from agentbus_sidecar.cli.app import app
from agentbus_sidecar.cli.common import JsonFlag, emit, guarded, paths, run
from agentbus_sidecar.runtime import open_runtime

if TYPE_CHECKING:
    from rich.console import Console

PANEL = "Messages"


@app.command(name="dead-letters", rich_help_panel=PANEL)
def dead_letters(
    ctx: typer.Context,
    limit: Annotated[int, typer.Option("--limit", min=1, max=1000)] = 200,
    as_json: JsonFlag = False,
) -> None:
    """Messages this agent sent that were dead-lettered, newest first, with the reason."""

    async def act() -> list[dict[str, Any]]:
        async with open_runtime(paths(ctx).credentials, paths(ctx).state_dir) as rt:
            params = {"from": rt.agent_id, "status": "dead_lettered"}
            return await rt.session.items(rt.client.list_messages, params, limit)

    with guarded(as_json):
        found = run(act())

    def human(out: Console) -> None:
        if not found:
            out.print("no dead letters", markup=False)
        for message in found:
            out.print(
                f"{message.get('id')}  to {message.get('to')}  {message.get('dlq_reason')}  "
                f"accepted {message.get('accepted_at')}",
                markup=False,
            )
        if found:
            out.print("send one again with `agentbus redrive <msg_id>`", markup=False)

    emit(as_json, {"dead_letters": found}, human)


@app.command(rich_help_panel=PANEL)
def redrive(
    ctx: typer.Context,
    msg_id: Annotated[str, typer.Argument(help="msg_ id of a dead-lettered message you sent")],
    as_json: JsonFlag = False,
) -> None:
    """Send a dead-lettered message out again, as it was signed.

    Its recipient gets a fresh round of delivery attempts."""

    async def act() -> dict[str, Any]:
        async with open_runtime(paths(ctx).credentials, paths(ctx).state_dir) as rt:
            return await rt.session.call(rt.client.redrive, msg_id)

    with guarded(as_json):
        message = run(act())

    def human(out: Console) -> None:
        out.print(
            f"{message.get('id')} is {message.get('status')} again (stream sequence "
            f"{message.get('stream_seq')}); `agentbus trace {message.get('id')}` follows it",
            markup=False,
        )

    emit(as_json, message, human)
