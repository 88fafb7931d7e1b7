"""``agentbus agents``: the agents this one may address (04-API-SPEC.md §2.2)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from agentbus_sidecar.cli.app import app
from agentbus_sidecar.cli.common import JsonFlag, emit, guarded, paths, run
from agentbus_sidecar.runtime import open_runtime

if TYPE_CHECKING:
    from rich.console import Console


@app.command(rich_help_panel="Messages")
def agents(
    ctx: typer.Context,
    capability: Annotated[
        str | None, typer.Option("--capability", help="Only agents offering this capability.")
    ] = None,
    query: Annotated[
        str | None, typer.Option("--query", "-q", help="Text in the name or description.")
    ] = None,
    status: Annotated[
        str | None, typer.Option("--status", help="registered, online, idle, offline, disabled.")
    ] = None,
    limit: Annotated[int, typer.Option("--limit", min=1, max=1000)] = 200,
    as_json: JsonFlag = False,
) -> None:
    """Find agents to send to: by capability, text or status (every page up to --limit)."""
    filters = {"capability": capability, "q": query, "status": status}
    params: dict[str, Any] = {k: v for k, v in filters.items() if v is not None}

    async def act() -> list[dict[str, Any]]:
        async with open_runtime(paths(ctx).credentials, paths(ctx).state_dir) as rt:
            return await rt.session.items(rt.client.list_agents, params, limit)

    with guarded(as_json):
        found = run(act())

    def human(out: Console) -> None:
        if not found:
            out.print("no agents found", markup=False)
        for agent in found:
            offered = ", ".join(c.get("name", "") for c in agent.get("capabilities") or [])
            out.print(f"{agent.get('address')}  {agent.get('status')}", markup=False, end="")
            out.print(f"  [{offered}]" if offered else "", markup=False, end="")
            out.print(f"  {agent.get('description')}" if agent.get("description") else "")

    emit(as_json, {"agents": found}, human)
