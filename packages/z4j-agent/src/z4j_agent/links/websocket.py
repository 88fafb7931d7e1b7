"""The WebSocket link: ``ws(s)://<brain>/ws/agent`` with the agent token as a Bearer header."""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any

from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidStatus

from z4j_agent.config import AgentConfig
from z4j_agent.identity import AGENT_VERSION
from z4j_agent.links import STATUS_TO_CLOSE, Frame, LinkClosed
from z4j_agent.protocol import CLOSE_BAD_HELLO, FrameError

HELLO_TIMEOUT = 10.0


def _parse(message: str | bytes) -> Frame:
    try:
        frame: Any = json.loads(message)
    except ValueError as exc:
        raise FrameError("a frame must be JSON", CLOSE_BAD_HELLO) from exc
    if not isinstance(frame, dict):
        raise FrameError("a frame must be a JSON object", CLOSE_BAD_HELLO)
    return frame


def _closed(exc: ConnectionClosed) -> LinkClosed:
    close = exc.rcvd or exc.sent
    return LinkClosed(close.code if close else 1006, close.reason if close else "connection lost")


class WebSocketLink:
    def __init__(self, config: AgentConfig, open_timeout: float = 10.0) -> None:
        self._config = config
        self._open_timeout = open_timeout
        self._ws: ClientConnection | None = None

    async def _open(self) -> ClientConnection:
        try:
            self._ws = await connect(
                self._config.ws_url,
                additional_headers={"Authorization": f"Bearer {self._config.token}"},
                user_agent_header=f"z4j-agent/{AGENT_VERSION}",
                open_timeout=self._open_timeout,
                max_size=8 * 1024 * 1024,
                close_timeout=5,
            )
        except InvalidStatus as exc:
            status = exc.response.status_code
            raise LinkClosed(STATUS_TO_CLOSE.get(status, 1006), f"HTTP {status}") from None
        return self._ws

    async def hello(self, frame: Frame) -> Frame:
        ws = await self._open()
        try:
            await ws.send(json.dumps(frame))
            return _parse(await asyncio.wait_for(ws.recv(), HELLO_TIMEOUT))
        except ConnectionClosed as exc:
            raise _closed(exc) from None

    async def send(self, frame: Frame) -> None:
        if self._ws is None:
            raise LinkClosed(1006, "not connected")
        try:
            await self._ws.send(json.dumps(frame))
        except ConnectionClosed as exc:
            raise _closed(exc) from None

    async def receive(self) -> tuple[str, Frame]:
        if self._ws is None:
            raise LinkClosed(1006, "not connected")
        try:
            return "ws", _parse(await self._ws.recv())
        except ConnectionClosed as exc:
            raise _closed(exc) from None

    async def close(self, code: int = 1000, reason: str = "") -> None:
        if self._ws is not None:
            ws, self._ws = self._ws, None
            with contextlib.suppress(Exception):  # closing a broken socket must not raise
                await ws.close(code, reason[:120])
