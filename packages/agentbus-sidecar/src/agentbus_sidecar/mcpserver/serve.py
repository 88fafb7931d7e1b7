"""``agentbus mcp serve``: one runtime for the server's life, the tools on it, the sidecar loop
beside them (``loop``), and stdio or streamable HTTP until the harness goes away."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from agentbus_sidecar.clock import format_ts, utcnow
from agentbus_sidecar.mcpserver.http import bearer_token, serve_http
from agentbus_sidecar.mcpserver.loop import keep_loop_running
from agentbus_sidecar.mcpserver.tools import build_server
from agentbus_sidecar.runtime import open_runtime
from agentbus_sidecar.store import state_db_path

__all__ = ["STDIO", "STREAMABLE_HTTP", "TRANSPORTS", "serve"]

STDIO, STREAMABLE_HTTP = "stdio", "http"
TRANSPORTS = (STDIO, STREAMABLE_HTTP)


def log(line: str) -> None:
    """Standard error only: on stdio, standard output carries the protocol."""
    sys.stderr.write(f"{format_ts(utcnow())} agentbus mcp: {line}\n")
    sys.stderr.flush()


async def serve(
    credentials: Path, state_dir: Path | None, transport: str = STDIO, port: int = 0
) -> None:
    async with open_runtime(credentials, state_dir) as rt:
        state_db = state_db_path(rt.agent_id, state_dir)
        server = build_server(rt, state_dir)
        stop = asyncio.Event()
        loop = asyncio.create_task(keep_loop_running(rt, state_db, stop, log))
        try:
            if transport == STREAMABLE_HTTP:
                log(
                    f"streamable HTTP at http://127.0.0.1:{port}/mcp; bearer token in "
                    f"{state_db.parent / 'mcp-http.token'}"
                )
                await serve_http(server, port, bearer_token(state_db))
            else:
                await server.run_stdio_async()
        finally:
            stop.set()
            await loop
