"""``agentbus mcp serve`` and ``agentbus mcp bench``. The MCP SDK is imported inside the
commands, so that no other command pays for it at start."""

from __future__ import annotations

import os
from typing import Annotated

import typer

from agentbus_sidecar.cli.app import mcp_app
from agentbus_sidecar.cli.common import JsonFlag, emit, guarded, paths, run


@mcp_app.command()
def serve(
    ctx: typer.Context,
    transport: Annotated[
        str, typer.Option("--transport", help="stdio (the harness starts this command) or http.")
    ] = "stdio",
    port: Annotated[
        int, typer.Option("--port", min=1, max=65535, help="With --transport http, on 127.0.0.1.")
    ] = 8765,
) -> None:
    """Serve this agent's MCP tools (send, inbox, read, reply, tasks, agents, trace).

    The sidecar loop runs inside unless `agentbus sidecar run` already runs for the agent."""
    from agentbus_sidecar.mcpserver.serve import TRANSPORTS
    from agentbus_sidecar.mcpserver.serve import serve as serve_mcp

    if transport not in TRANSPORTS:
        raise typer.BadParameter(f"one of {', '.join(TRANSPORTS)}", param_hint="--transport")
    where = paths(ctx)
    with guarded(False):
        run(serve_mcp(where.credentials, where.state_dir, transport, port))


@mcp_app.command()
def bench(
    ctx: typer.Context,
    calls: Annotated[int, typer.Option("--calls", min=10, max=100_000)] = 200,
    tool: Annotated[str, typer.Option("--tool", help="A tool that takes no arguments.")] = "inbox",
    as_json: JsonFlag = False,
) -> None:
    """Time tool calls answered locally, through a real MCP client over stdio (p50, p95)."""
    from agentbus_sidecar.mcpserver.bench import bench_tool_calls

    where = paths(ctx)
    env = dict(os.environ, AGENTBUS_CREDENTIALS=str(where.credentials))
    if where.state_dir is not None:
        env["AGENTBUS_STATE_DIR"] = str(where.state_dir)
    result = run(bench_tool_calls(env, calls, tool))
    emit(
        as_json,
        vars(result),
        lambda out: out.print(
            f"{result.calls} calls of {result.tool}: p50 {result.p50_ms} ms, "
            f"p95 {result.p95_ms} ms, max {result.max_ms} ms",
            markup=False,
        ),
    )
