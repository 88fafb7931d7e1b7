"""WebSocket ``/ws/agent``: the agents' main channel (plain Starlette, no FastAPI machinery)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from typing import Any

from starlette.websockets import WebSocket, WebSocketDisconnect
from z4j_agent.protocol import CLOSE_BAD_HELLO, CLOSE_REPLACED, FrameError

from z4j.api.agent_session import AgentSession, authenticate
from z4j.brain import Brain
from z4j.controllers.commands import pump
from z4j.ingest.frames import FrameRefused, parse_frame

log = logging.getLogger("z4j.agent_ws")


class _Live:
    def __init__(self, ws: WebSocket) -> None:
        self.ws = ws

    async def close(self, code: int, reason: str) -> None:
        with contextlib.suppress(RuntimeError):  # already closed
            await self.ws.close(code=code, reason=reason)


async def _receive(ws: WebSocket) -> tuple[Any, bool]:
    """The next frame, parsed with bounds, and whether it may hold unstorable values."""
    message = await ws.receive()
    if message["type"] == "websocket.disconnect":
        raise WebSocketDisconnect(message.get("code", 1000))
    raw = message.get("text") if message.get("text") is not None else message.get("bytes")
    if raw is None:
        raise FrameError("frame missing", CLOSE_BAD_HELLO)
    return parse_frame(raw)


async def agent_websocket(ws: WebSocket) -> None:
    brain: Brain = ws.app.state.brain
    session: AgentSession | None = None
    key = None
    commands: asyncio.Task[None] | None = None
    # Signing and sending happen under one lock, so frames leave in sequence order whether
    # they are replies or commands.
    sending = asyncio.Lock()
    await ws.accept()
    try:
        agent = await authenticate(brain, ws.headers.get("authorization"))
        session = AgentSession(brain, agent)
        try:
            hello, _ = await _receive(ws)
        except FrameRefused as exc:
            raise FrameError(exc.reason, CLOSE_BAD_HELLO) from None
        await ws.send_text(json.dumps(await session.hello(hello)))
        key = (session.agent_id, session.worker_id)
        previous = brain.live.get(key)
        brain.live[key] = _Live(ws)
        if previous is not None:
            await previous.close(CLOSE_REPLACED, "replaced by a newer connection")
        greeted = session

        async def send_command(row: dict[str, Any]) -> None:
            async with sending:
                (frame,) = await greeted.command_frames([row])
                await ws.send_text(json.dumps(frame))

        commands = asyncio.create_task(
            pump(brain, session.project_id, session.agent_id, send_command)
        )
        while True:
            try:
                frame: tuple[Any, bool] | None = await _receive(ws)
            except FrameRefused as exc:
                frame, refused = None, exc
            async with sending:
                reply = (
                    await session.refused_frame(refused)
                    if frame is None
                    else await session.handle(*frame)
                )
                if reply is not None:
                    await ws.send_text(json.dumps(reply))
    except FrameError as exc:
        log.warning(
            "closing agent connection: %s", exc.reason, extra={"close_code": exc.close_code}
        )
        await _Live(ws).close(exc.close_code, exc.reason[:120])
    except WebSocketDisconnect:
        pass
    finally:
        if commands is not None:
            commands.cancel()
            await asyncio.gather(commands, return_exceptions=True)
        if (
            key is not None
            and brain.live.get(key) is not None
            and getattr(brain.live[key], "ws", None) is ws
        ):
            del brain.live[key]
        if session is not None:
            await session.disconnected()
