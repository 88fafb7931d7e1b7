"""The HTTP fallback of the agent channel, for networks that do not pass WebSockets.

``POST /api/v1/agent/hello`` answers ``hello_ack`` and opens a session kept in this process;
every later request names it in ``X-Z4J-Session`` and carries the same bearer token. Signed
frames are posted to ``/api/v1/agent/events`` (an ``event_batch`` is answered by its signed
``event_batch_ack``, other frames by 204); ``GET /api/v1/agent/commands`` long-polls for
commands. Protocol failures map onto HTTP statuses with the meaning of the WebSocket close
codes (401, 403, 400, 426; 404 for an unknown or expired session, 409 when replaced).
Sessions live in the serving process, so behind several worker processes an HTTP-fallback
agent needs sticky routing; the WebSocket channel has no such need.
"""

from __future__ import annotations

import asyncio
import hmac
import time
from dataclasses import dataclass, field
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from z4j_agent.protocol import (
    CLOSE_BAD_HELLO,
    CLOSE_BAD_SIGNATURE,
    CLOSE_BAD_TOKEN,
    CLOSE_REPLACED,
    CLOSE_UNSUPPORTED_PROTOCOL,
    MAX_FRAME_BYTES,
    FrameError,
)

from z4j.api.agent_session import AgentSession, authenticate, bearer_token
from z4j.brain import Brain
from z4j.ingest.frames import FrameRefused, parse_frame

IDLE_SECONDS = 600
_STATUS = {
    CLOSE_BAD_TOKEN: 401,
    CLOSE_BAD_SIGNATURE: 403,
    CLOSE_BAD_HELLO: 400,
    CLOSE_UNSUPPORTED_PROTOCOL: 426,
    CLOSE_REPLACED: 409,
}


@dataclass
class HttpSession:
    session: AgentSession
    token_hash: str
    used: float = field(default_factory=time.monotonic)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    closed: asyncio.Event = field(default_factory=asyncio.Event)
    close_code: int = 0

    async def close(self, code: int, reason: str) -> None:
        self.close_code = code
        self.closed.set()


def _registry(brain: Brain) -> dict[str, HttpSession]:
    sessions: dict[str, HttpSession] = brain.http_sessions
    now = time.monotonic()
    for key in [k for k, s in sessions.items() if now - s.used > IDLE_SECONDS]:
        del sessions[key]
    return sessions


def _problem(exc: FrameError) -> Response:
    status = _STATUS.get(exc.close_code, 400)
    return JSONResponse(
        {
            "type": "about:blank",
            "title": "agent protocol error",
            "status": status,
            "code": exc.close_code,
            "detail": exc.reason,
        },
        status_code=status,
        media_type="application/problem+json",
    )


async def _frame(request: Request) -> tuple[Any, bool]:
    """The posted frame, parsed with bounds, and whether it may hold unstorable values."""
    body = await request.body()
    if len(body) > MAX_FRAME_BYTES:
        raise FrameError("frame larger than the maximum frame size", CLOSE_BAD_HELLO)
    return parse_frame(body)


async def _session(request: Request) -> HttpSession:
    brain: Brain = request.app.state.brain
    found = _registry(brain).get(request.headers.get("x-z4j-session", ""))
    token = bearer_token(request.headers.get("authorization"))
    if found is None:
        if token is None:
            raise FrameError("missing agent token", CLOSE_BAD_TOKEN)
        raise LookupError
    if token is None or not hmac.compare_digest(found.token_hash, brain.token_hasher.hash(token)):
        raise FrameError("token does not match the session", CLOSE_BAD_TOKEN)
    if found.closed.is_set():
        raise FrameError("session replaced", found.close_code or CLOSE_REPLACED)
    found.used = time.monotonic()
    return found


async def hello(request: Request) -> Response:
    brain: Brain = request.app.state.brain
    try:
        agent = await authenticate(brain, request.headers.get("authorization"))
        session = AgentSession(brain, agent)
        frame, _ = await _frame(request)
        ack = await session.hello(frame)
    except FrameRefused as exc:
        return _problem(FrameError(exc.reason, CLOSE_BAD_HELLO))
    except FrameError as exc:
        return _problem(exc)
    token = bearer_token(request.headers.get("authorization")) or ""
    entry = HttpSession(session, brain.token_hasher.hash(token))
    key = (session.agent_id, session.worker_id)
    previous = brain.live.get(key)
    brain.live[key] = entry
    if previous is not None:
        await previous.close(CLOSE_REPLACED, "replaced by a newer connection")
    _registry(brain)[session.session_id] = entry
    return JSONResponse(ack)


async def events(request: Request) -> Response:
    try:
        entry = await _session(request)
        async with entry.lock:  # one frame at a time keeps the sequence checks meaningful
            try:
                reply = await entry.session.handle(*await _frame(request))
            except FrameRefused as exc:
                reply = entry.session.refused_frame(exc)
    except LookupError:
        return Response(status_code=404)
    except FrameError as exc:
        return _problem(exc)
    return JSONResponse(reply) if reply is not None else Response(status_code=204)


async def commands(request: Request) -> Response:
    try:
        entry = await _session(request)
    except LookupError:
        return Response(status_code=404)
    except FrameError as exc:
        return _problem(exc)
    wait = min(max(int(request.query_params.get("wait", "30") or 30), 0), 60)
    # The brain issues no commands yet: hold the poll until it times out or the session ends.
    try:
        await asyncio.wait_for(entry.closed.wait(), timeout=wait)
    except TimeoutError:
        return JSONResponse({"frames": []})
    return _problem(FrameError("session replaced", entry.close_code or CLOSE_REPLACED))


routes = [
    Route("/api/v1/agent/hello", hello, methods=["POST"]),
    Route("/api/v1/agent/events", events, methods=["POST"]),
    Route("/api/v1/agent/commands", commands, methods=["GET"]),
]
