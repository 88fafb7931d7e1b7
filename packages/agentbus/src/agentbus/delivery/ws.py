"""``GET /v1/inbox/ws`` (04-API-SPEC.md §5.2): deliveries pushed against credit, and the
agent's own traffic.

Frames are JSON text. The server says ``hello`` (naming the client frame types it takes,
``CLIENT_FRAMES``), then sends one delivery per unit of ``credit`` the client granted: under
subprotocol ``agentbus.v2`` the deliveries of one pull travel together in one ``deliveries``
frame, under ``agentbus.v1`` (or none) one ``delivery`` frame each. ``ack``, ``nak``, ``term``
and ``read`` frames carry the bodies of §5.3-5.6 and are answered by ``result`` (``for`` = the
frame's ``id``); ``send`` frames carry the body of ``POST /v1/messages/batch`` and run beside
the other frames (``send_frames``); ``auth`` swaps in a refreshed credential of the same agent;
``ping``/``pong`` every 20 s. A bad frame (not JSON, over ``FRAME_MAX`` or ``SEND_FRAME_MAX``,
nested past ``FRAME_DEPTH`` or ``MAX_DEPTH``, no ``type``, an unknown type) is answered by a
``result`` with AB-8001 and skipped, the connection kept. Close codes: 4400 unused, 4401
credential invalid or expired, 4403 agent disabled or tenant suspended, 4002 replaced by a
newer connection, 1012 the gateway is stopping (``DeliveryService.drain``). ``status`` frames
report what became of messages this agent sent (``delivery.notices``). Deliveries pulled but
never written to the socket are naked with no delay, so they need not wait for AckWait.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

from nats.aio.msg import Msg
from nats.aio.subscription import Subscription
from platformkit import boundedjson
from platformkit.storable import unstorable_reason
from starlette.websockets import WebSocket, WebSocketDisconnect

from agentbus.delivery import jetstream, pull, send_frames
from agentbus.delivery.domain import ACK_WAIT_S, DEFAULT_WAIT_S, MAX_BATCH, MAX_BYTES, MAX_DELIVER
from agentbus.delivery.frames import Session, problem_of, settle_frame
from agentbus.delivery.notices import status_subject
from agentbus.delivery.service import Connection, nats_client, service_of
from agentbus.errors import AgentBusError, RequestInvalid
from agentbus.gateway.api.auth import bearer_of, principal_from_credential, require_agent_scope
from agentbus.gateway.api.request_limits import Kind
from agentbus.gateway.context import get_gateway
from agentbus.gateway.domain.envelope import BATCH_BODY_MAX, MAX_DEPTH, read_json
from agentbus.gateway.domain.wire import format_ts
from agentbus.ids import parse_id

log = logging.getLogger(__name__)

BATCHED = "agentbus.v2"  # a pull's deliveries in one ``deliveries`` frame
SINGLE = "agentbus.v1"  # one ``delivery`` frame each
PING_EVERY_S = 20.0


async def inbox_socket(ws: WebSocket) -> None:
    offered = ws.scope.get("subprotocols", [])
    subprotocol = next((p for p in (BATCHED, SINGLE) if p in offered), None)
    await ws.accept(subprotocol=subprotocol)
    gw = get_gateway(ws)
    try:
        credential = bearer_of(ws)
        who = require_agent_scope(await principal_from_credential(gw, credential), "receive")
        gw.request_limits.take(Kind.AGENT, who.agent_id)  # the upgrade is one of its requests
    except AgentBusError as exc:
        await ws.close({401: 4401, 429: 4429}.get(exc.status, 4403))
        return
    svc = service_of(ws)
    async with svc.connection(who.tenant_id, who.agent_id) as conn:
        session = Session(ws, svc, who, credential, batched=subprotocol == BATCHED)
        await session.send({
            "type": "hello", "connection_id": conn.id, "ack_wait_ms": ACK_WAIT_S * 1000,
            "max_deliver": MAX_DELIVER, "server_time": format_ts(datetime.now(UTC)),
            "frames": list(CLIENT_FRAMES),
        })  # fmt: skip
        statuses = await _forward_statuses(session)
        tasks = [
            asyncio.create_task(_receive(session)),
            asyncio.create_task(_pump(session, conn.ended)),
            asyncio.create_task(_ping(session)),
            asyncio.create_task(_watch(session, conn)),
        ]
        _done, pending = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        await send_frames.finish(session)
        with contextlib.suppress(Exception):
            await statuses.unsubscribe()
        with contextlib.suppress(Exception):
            await ws.close(session.close_code)


async def _forward_statuses(session: Session) -> Subscription:
    """``status`` frames for messages this agent sent, from any gateway instance."""
    nc = nats_client(session.svc.gateway.broker)

    async def on_status(msg: Msg) -> None:
        with contextlib.suppress(Exception):
            await session.send(json.loads(msg.data))

    return await nc.subscribe(
        status_subject(session.who.tenant_id, session.who.agent_id), cb=on_status
    )


FRAME_MAX = 1024 * 1024
"""The largest client frame answered (UTF-8 bytes): a settlement frame's bodies have the HTTP
routes' 1 MiB cap."""
SEND_FRAME_MAX = BATCH_BODY_MAX + 1024
"""A ``send`` frame's: the batch route's body cap, and room for the frame's type and id."""
FRAME_DEPTH = 16
"""How deeply a client frame nests; a ``send`` frame, as the batch route's body, ``MAX_DEPTH``
(an envelope's ``data`` may nest)."""
CREDIT_MAX = 1_000_000
Frame = tuple[dict[str, Any], str | None]
"""A client frame, and what ``read_json`` found wrong in it that only a ``send`` frame
refuses."""


def _utf8_size(text: str) -> int:
    return len(text) if text.isascii() else len(text.encode())


def _depth(text: str) -> int:
    """How deeply ``text`` nests, when that is more than ``FRAME_DEPTH`` (counted up to past
    ``MAX_DEPTH``); 0 for a text with fewer brackets than that, as nearly every frame has."""
    if text.count("{") + text.count("[") <= FRAME_DEPTH:
        return 0
    return boundedjson.nesting_depth(text, limit=MAX_DEPTH)


def _parse_frame(text: str) -> Frame | str:
    """The frame, or why it is refused. Every frame is measured and parsed within a ``send``
    frame's bounds; any other type must also keep within ``FRAME_MAX`` and ``FRAME_DEPTH``."""
    size, depth = _utf8_size(text), _depth(text)
    if size > SEND_FRAME_MAX:
        return f"a frame is at most {FRAME_MAX} bytes, a send frame {SEND_FRAME_MAX}"
    if depth > MAX_DEPTH:
        return f"the frame is refused: nested deeper than {MAX_DEPTH} levels"
    try:
        frame, flaw = read_json(text)
    except (ValueError, RecursionError) as exc:
        return f"the frame is refused: not valid JSON: {str(exc).splitlines()[0][:200]}"
    if not isinstance(frame, dict) or not isinstance(frame.get("type"), str):
        return 'a frame is a JSON object with a "type"'
    if frame["type"] != "send" and size > FRAME_MAX:
        return f"a frame is at most {FRAME_MAX} bytes, a send frame {SEND_FRAME_MAX}"
    if frame["type"] != "send" and depth > FRAME_DEPTH:
        return f"the frame is refused: nested deeper than {FRAME_DEPTH} levels"
    return frame, flaw


async def _refuse(session: Session, frame_id: Any, reason: str) -> None:
    """A bad frame is answered and ignored: the socket and the frames after it carry on."""
    for_id = frame_id if isinstance(frame_id, str) and unstorable_reason(frame_id) is None else None
    problem = problem_of(RequestInvalid(reason))
    await session.send({"type": "result", "for": for_id, "problem": problem})


async def _on_credit(session: Session, frame: dict[str, Any], _flaw: str | None) -> bool:
    n = frame.get("n")
    if type(n) is int and 0 <= n <= CREDIT_MAX:
        session.grant(n)
    else:
        await _refuse(session, frame.get("id"), f"credit n is 0 to {CREDIT_MAX}")
    return True


async def _on_settle(session: Session, frame: dict[str, Any], _flaw: str | None) -> bool:
    await session.send(await settle_frame(session, frame["type"], frame))
    return True


async def _on_send(session: Session, frame: dict[str, Any], flaw: str | None) -> bool:
    await send_frames.start(session, frame, flaw)
    return True


async def _on_auth(session: Session, frame: dict[str, Any], _flaw: str | None) -> bool:
    return await session.reauthenticate(frame)


async def _on_ping(session: Session, frame: dict[str, Any], _flaw: str | None) -> bool:
    await session.send({"type": "pong", "id": frame.get("id")})
    return True


async def _on_pong(_session: Session, _frame: dict[str, Any], _flaw: str | None) -> bool:
    return True


Handler = Callable[[Session, dict[str, Any], str | None], Awaitable[bool]]
CLIENT_FRAMES: dict[str, Handler] = {
    "credit": _on_credit, "ack": _on_settle, "nak": _on_settle, "term": _on_settle,
    "read": _on_settle, "send": _on_send, "auth": _on_auth, "ping": _on_ping, "pong": _on_pong,
}  # fmt: skip
"""The client frame types and their handlers (False ends the connection); ``hello`` names
them, so a client can tell what this gateway takes."""


async def _receive(session: Session) -> None:
    """Client frames until the socket closes, one after the other (a ``send`` frame is started
    and runs beside them); a bad frame is answered by a ``result`` with AB-8001 and skipped."""
    while True:
        try:
            text = await session.ws.receive_text()
        except WebSocketDisconnect:
            return
        except KeyError:  # a binary frame
            await _refuse(session, None, "frames are JSON text")
            continue
        parsed = _parse_frame(text)
        if isinstance(parsed, str):
            await _refuse(session, None, parsed)
            continue
        frame, flaw = parsed
        handler = CLIENT_FRAMES.get(frame["type"])
        if handler is None:
            await _refuse(session, frame.get("id"), f"no frame type {frame['type'][:40]!r}")
        elif not await handler(session, frame, flaw):
            return


async def _pump(session: Session, ended: asyncio.Event) -> None:
    """Pull while there is credit; write each delivery; nak what could not be written."""
    while True:
        await session.credit_available.wait()
        try:
            batch = await pull.fetch(
                session.svc, session.who, wait_s=DEFAULT_WAIT_S,
                max_items=min(session.credit, MAX_BATCH), max_bytes=MAX_BYTES, stop=ended,
            )  # fmt: skip
        except AgentBusError as exc:  # NATS away (AB-9003) and the like: tell, back off, retry
            await session.send({"type": "result", "for": None, "problem": problem_of(exc)})
            await asyncio.sleep(1.0)
            continue
        except Exception:
            log.exception("delivery WebSocket pump failed")
            session.close_code = 1011
            return
        if session.batched and batch:
            await _write(session, {"type": "deliveries", "deliveries": batch}, batch)
            session.take(len(batch))
            continue
        for index, delivery in enumerate(batch):
            await _write(session, {"type": "delivery", **delivery}, batch[index:])
            session.take(1)


async def _write(session: Session, frame: dict[str, Any], unsent: list[dict[str, Any]]) -> None:
    """Write a frame of deliveries; if it fails, ``unsent`` go back to the stream at once."""
    try:
        await session.send(frame)
    except Exception:
        await _hand_back(session, unsent)
        raise


async def _hand_back(session: Session, unsent: list[dict[str, Any]]) -> None:
    nc = nats_client(session.svc.gateway.broker)
    for delivery in unsent:
        with contextlib.suppress(Exception):
            subject = session.svc.tokens.verify(
                delivery["ack_token"], session.who.tenant_id, session.who.agent_id,
                parse_id("msg", delivery["msg_id"]),
            )  # fmt: skip
            await jetstream.nak(nc, subject.reply, 0)


async def _ping(session: Session) -> None:
    while True:
        await asyncio.sleep(PING_EVERY_S)
        if session.who.credential_expires_at < time.time():
            session.close_code = 4401  # expired without an ``auth`` frame
            return
        await session.send({"type": "ping"})


async def _watch(session: Session, conn: Connection) -> None:
    await conn.ended.wait()
    session.close_code = 4002 if conn.replaced.is_set() else 1012
