"""The HTTP fallback of the agent channel, for networks that do not pass WebSockets.

``POST /api/v1/agent/hello`` answers ``hello_ack`` and opens a session; every later request
names it in ``X-Z4J-Session`` and carries the same bearer token. Signed frames are posted to
``/api/v1/agent/events`` (an ``event_batch`` is answered by its signed ``event_batch_ack``,
other frames by 204); ``GET /api/v1/agent/commands`` long-polls for commands. Protocol failures
map onto HTTP statuses with the meaning of the WebSocket close codes (401, 403, 400, 426; 404
for an unknown or expired session, 409 when replaced).

Sessions live in PostgreSQL (``z4j.api.agent_http_session``): any brain replica serves any
request of a session, so several brains behind a load balancer need no sticky routing.

The z4j-celery agent's long-poll transport speaks a second dialect on the same routes: it
sends no hello; every request carries ``X-Z4J-Session-Nonce`` (fresh per connection), which
names the session and is its signing binding (``session_id``). A command poll with
``max_frames=0`` claims nothing and answers at once: it is the agent's probe, and the
``X-Z4J-Agent-Id`` and ``X-Z4J-Project-Id`` headers give it the identities to sign with. The
frames of its polls and of its events POST (``{"frames": [...]}``) are each a JSON string; the
POST is answered by ``{"accepted": n}``, the number of frames the brain took (refused ones
included, as over the WebSocket, so they are not sent again).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from typing import Any

from platformkit.boundedjson import JsonRefused
from platformkit.boundedjson import loads as bounded_loads
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

from z4j.api import agent_http_session as shared
from z4j.api.agent_http_session import HttpLive, SharedSession
from z4j.api.agent_session import AgentSession, authenticate, bearer_token
from z4j.brain import Brain
from z4j.controllers.commands import POLL_SECONDS, claim, waker
from z4j.ingest.frames import FrameRefused, parse_frame
from z4j.store import agents as agent_store

MAX_WAIT_SECONDS = 60
MAX_FRAMES = 50
NONCE_HEADER = "x-z4j-session-nonce"
RETRY_CONTRACTS_HEADER = "x-z4j-retry-contracts"


async def _record_retry_contracts(brain: Brain, session: AgentSession, header: str | None) -> None:
    """A long-poll agent sends no hello, so no capabilities; what it does attest is, per
    engine, that it retries by reference (``X-Z4J-Retry-Contracts: celery=1``). That engine's
    ``retry_task`` is added to what the agent advertised before (docs/decisions/0029)."""
    engines = [
        name.strip()
        for name, _, flag in (part.partition("=") for part in (header or "").split(",")[:8])
        if flag.strip() == "1" and 0 < len(name.strip()) <= 40 and name.strip().isidentifier()
    ]
    async with brain.project_tx(session.project_id) as conn:
        for engine in engines:
            await agent_store.add_capability(conn, session.agent_id, engine, "retry_task")


_STATUS = {
    CLOSE_BAD_TOKEN: 401,
    CLOSE_BAD_SIGNATURE: 403,
    CLOSE_BAD_HELLO: 400,
    CLOSE_UNSUPPORTED_PROTOCOL: 426,
    CLOSE_REPLACED: 409,
}


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
    """The posted frame, parsed with bounds (size and depth: FrameRefused, answered as over the
    WebSocket), and whether it may hold unstorable values. The guard answers 413 past twice
    the frame size before a byte is kept."""
    return parse_frame(await request.body())


def _token_hash(brain: Brain, request: Request) -> str | None:
    token = bearer_token(request.headers.get("authorization"))
    return None if token is None else brain.token_hasher.hash(token)


async def _session(request: Request) -> SharedSession:
    brain: Brain = request.app.state.brain
    return await shared.by_id(
        brain, request.headers.get("x-z4j-session", ""), _token_hash(brain, request)
    )


async def hello(request: Request) -> Response:
    brain: Brain = request.app.state.brain
    try:
        agent = await authenticate(brain, request.headers.get("authorization"))
        frame, _ = await _frame(request)
        session, ack = await shared.hello(brain, agent, frame, _token_hash(brain, request) or "")
    except FrameRefused as exc:
        return _problem(FrameError(exc.reason, CLOSE_BAD_HELLO))
    except FrameError as exc:
        return _problem(exc)
    key = (session.agent_id, session.worker_id)
    previous = brain.live.get(key)
    brain.live[key] = HttpLive(brain, session.project_id, session.agent_id, session.session_id)
    if previous is not None:
        await previous.close(CLOSE_REPLACED, "replaced by a newer connection")
    return JSONResponse(ack)


def _int_param(request: Request, name: str, default: int, high: int) -> int:
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return default
    if not (raw.isascii() and raw.isdigit()) or len(raw) > 6:
        raise FrameError(f"{name} must be a small non-negative integer", CLOSE_BAD_HELLO)
    return min(int(raw), high)


async def _nonce_session(request: Request) -> SharedSession | None:
    """The long-poll session named by ``X-Z4J-Session-Nonce``, made on first use; None when
    the request carries no nonce (our agent's dialect)."""
    nonce = request.headers.get(NONCE_HEADER)
    if nonce is None or request.headers.get("x-z4j-session"):
        return None
    if (
        not 16 <= len(nonce) <= 64
        or not nonce.isascii()
        or not nonce.replace("-", "").replace("_", "").isalnum()
    ):
        raise FrameError("malformed session nonce", CLOSE_BAD_HELLO)
    brain: Brain = request.app.state.brain
    agent = await authenticate(brain, request.headers.get("authorization"))
    session, created = await shared.by_nonce(brain, agent, nonce, _token_hash(brain, request) or "")
    if created:
        await _record_retry_contracts(brain, session, request.headers.get(RETRY_CONTRACTS_HEADER))
    return session


def _identity_headers(session: AgentSession) -> dict[str, str]:
    return {
        "X-Z4J-Agent-Id": str(session.agent_id),
        "X-Z4J-Project-Id": str(session.project_id),
    }


async def _frames_post(session: SharedSession, request: Request) -> Response:
    """The long-poll dialect's events POST: several signed frames, each a JSON string."""
    body = await request.body()
    try:
        outer = bounded_loads(body, max_depth=3, max_bytes=2 * MAX_FRAME_BYTES)
    except JsonRefused as exc:
        raise FrameError(f"body {exc.reason}", CLOSE_BAD_HELLO) from None
    frames = outer.get("frames") if isinstance(outer, dict) else None
    if not isinstance(frames, list) or not all(isinstance(f, str) for f in frames):
        raise FrameError('the body is {"frames": [<frame as a JSON string>, ...]}', CLOSE_BAD_HELLO)
    accepted = 0
    for raw in frames:
        try:
            await session.handle(*parse_frame(raw))
        except FrameRefused as exc:
            session.note_refused(exc)  # taken, so it is not sent again
        accepted += 1
    return JSONResponse({"accepted": accepted})


async def events(request: Request) -> Response:
    try:
        nonce_session = await _nonce_session(request)
        if nonce_session is not None:
            return await _frames_post(nonce_session, request)
        session = await _session(request)
        try:
            reply = await session.handle(*await _frame(request))
        except FrameRefused as exc:
            reply = await session.refused_frame(exc)
    except LookupError:
        return Response(status_code=404)
    except FrameError as exc:
        return _problem(exc)
    return JSONResponse(reply) if reply is not None else Response(status_code=204)


async def commands(request: Request) -> Response:
    """Long-poll: answers as soon as commands are queued for the agent, or after ``wait``.

    A queued command wakes the poll through LISTEN/NOTIFY whichever replica queued it; the
    poll also looks every ``POLL_SECONDS``, and then sees whether a newer hello replaced its
    session on any replica."""
    brain: Brain = request.app.state.brain
    try:
        wait = _int_param(request, "wait", 30, MAX_WAIT_SECONDS)
        max_frames = _int_param(request, "max_frames", MAX_FRAMES, MAX_FRAMES)
        session = await _nonce_session(request)
        headers: dict[str, str] = {}
        as_text = session is not None  # the long-poll dialect sends each frame as a JSON string
        if session is None:
            session = await _session(request)
        else:
            headers = _identity_headers(session)
    except LookupError:
        return Response(status_code=404)
    except FrameError as exc:
        return _problem(exc)
    if max_frames == 0:  # the z4j-celery agent's probe: identities only, nothing claimed
        return JSONResponse({"frames": []}, headers=headers)
    deadline = time.monotonic() + wait
    with waker(brain, session.agent_id) as wake:
        while True:
            if session.greeted and not await session.is_open():
                return _problem(FrameError("session replaced", CLOSE_REPLACED))
            wake.clear()
            rows = await claim(brain, session.project_id, session.agent_id, max_frames)
            if rows:
                frames = await session.command_frames(rows)
                sent: list[Any] = [json.dumps(f) for f in frames] if as_text else list(frames)
                return JSONResponse({"frames": sent}, headers=headers)
            left = deadline - time.monotonic()
            if left <= 0:
                break
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(wake.wait(), min(left, POLL_SECONDS))
    return JSONResponse({"frames": []}, headers=headers)


routes = [
    Route("/api/v1/agent/hello", hello, methods=["POST"]),
    Route("/api/v1/agent/events", events, methods=["POST"]),
    Route("/api/v1/agent/commands", commands, methods=["GET"]),
]
