"""Streamable HTTP for harnesses that prefer a URL to a child process: on loopback only, and
every request must carry ``Authorization: Bearer <token>``, a random token of this agent kept
beside its state.db (``mcp-http.token``, 0600) and compared in constant time. Anything else is
answered 401 with a problem+json body; the MCP SDK checks the Host header against loopback
names as well (DNS rebinding)."""

from __future__ import annotations

import hmac
import json
import os
import secrets
from pathlib import Path
from typing import Any

import uvicorn
from mcp.server.mcpserver import MCPServer
from starlette.types import ASGIApp, Receive, Scope, Send

__all__ = ["bearer_token", "serve_http"]

TOKEN_FILE = "mcp-http.token"  # noqa: S105 - a file name, not a secret
LOOPBACK = "127.0.0.1"


def bearer_token(state_db: Path) -> str:
    """The agent's HTTP token, created on first use."""
    path = state_db.parent / TOKEN_FILE
    if not path.exists():
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write(secrets.token_urlsafe(32) + "\n")
    return path.read_text().strip()


class RequireBearer:
    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self.expected = f"Bearer {token}".encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            given = dict(scope["headers"]).get(b"authorization", b"")
            if not hmac.compare_digest(given, self.expected):
                await _unauthorized(send)
                return
        await self.app(scope, receive, send)


async def _unauthorized(send: Send) -> None:
    body = json.dumps(
        {"type": "about:blank", "title": "unauthorized", "status": 401,
         "detail": "this MCP server needs the agent's bearer token"}
    ).encode()  # fmt: skip
    await send(
        {
            "type": "http.response.start",
            "status": 401,
            "headers": [
                (b"content-type", b"application/problem+json"),
                (b"www-authenticate", b"Bearer"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


async def serve_http(server: MCPServer[Any], port: int, token: str) -> None:
    app = RequireBearer(server.streamable_http_app(host=LOOPBACK), token)
    config = uvicorn.Config(app, host=LOOPBACK, port=port, log_level="warning", lifespan="on")
    await uvicorn.Server(config).serve()
