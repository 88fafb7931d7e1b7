"""``GET /v1/inbox/ws`` (04-API-SPEC.md §5.2): deliveries pushed against credit.

Frames are JSON text. The server says ``hello``, then sends one delivery per unit of
``credit`` the client granted: under subprotocol ``agentbus.v2`` the deliveries of one pull
travel together in one ``deliveries`` frame, under ``agentbus.v1`` (or none) one ``delivery``
frame each. ``ack``, ``nak``, ``term`` and ``read`` frames carry the bodies of §5.3-5.6 and
are answered by ``result`` (``for`` = the frame's ``id``); ``auth`` swaps in a refreshed
credential of the same agent; ``ping``/``pong`` every 20 s. A bad frame (not JSON, over
``FRAME_MAX``, nested past ``FRAME_DEPTH``, no ``type``, an unknown type) is answered by a
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
from datetime import UTC, datetime
from typing import Any

from nats.aio.msg import Msg
from nats.aio.subscription import Subscription
from platformkit import boundedjson
from platformkit.storable import unstorable_reason
from starlette.websockets import WebSocket, WebSocketDisconnect

from agentbus.delivery import jetstream, pull
from agentbus.delivery.domain import ACK_WAIT_S, DEFAULT_WAIT_S, MAX_BATCH, MAX_BYTES, MAX_DELIVER
from agentbus.delivery.frames import Session, problem_of, settle_frame
from agentbus.delivery.notices import status_subject
from agentbus.delivery.service import Connection, nats_client, service_of
from agentbus.errors import AgentBusError, RequestInvalid
from agentbus.gateway.api.auth import bearer_of, principal_from_credential
from agentbus.gateway.api.request_limits import Kind
from agentbus.gateway.context import get_gateway
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
        who = await principal_from_credential(gw, bearer_of(ws))
        if "receive" not in who.scopes:
            raise PermissionError("the credential lacks the receive scope")
        gw.request_limits.take(Kind.AGENT, who.agent_id)  # the upgrade is one of its requests
    except (AgentBusError, PermissionError) as exc:
        status = getattr(exc, "status", 403)
        await ws.close({401: 4401, 429: 4429}.get(status, 4403))
        return
    svc = service_of(ws)
    async with svc.connection(who.tenant_id, who.agent_id) as conn:
        session = Session(ws, svc, who, batched=subprotocol == BATCHED)
        await session.send({
            "type": "hello", "connection_id": conn.id, "ack_wait_ms": ACK_WAIT_S * 1000,
            "max_deliver": MAX_DELIVER, "server_time": format_ts(datetime.now(UTC)),
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
"""The largest client frame answered (characters): a settlement frame's bodies have the HTTP
routes' 1 MiB cap."""
FRAME_DEPTH = 16
CREDIT_MAX = 1_000_000


def _parse_frame(text: str) -> dict[str, Any] | str:
    """The frame, or why it is refused."""
    if len(text) > FRAME_MAX:
        return f"a frame is at most {FRAME_MAX} characters"
    try:
        frame = boundedjson.loads(text, max_depth=FRAME_DEPTH)
    except boundedjson.JsonRefused as exc:
        return f"the frame is refused: {exc.reason}"
    if not isinstance(frame, dict) or not isinstance(frame.get("type"), str):
        return 'a frame is a JSON object with a "type"'
    return frame


async def _refuse(session: Session, frame_id: Any, reason: str) -> None:
    """A bad frame is answered and ignored: the socket and the frames after it carry on."""
    for_id = frame_id if isinstance(frame_id, str) and unstorable_reason(frame_id) is None else None
    problem = problem_of(RequestInvalid(reason))
    await session.send({"type": "result", "for": for_id, "problem": problem})


async def _receive(session: Session) -> None:
    """Client frames until the socket closes; a bad frame is answered by a ``result`` with
    AB-8001 and skipped."""
    while True:
        try:
            text = await session.ws.receive_text()
        except WebSocketDisconnect:
            return
        except KeyError:  # a binary frame
            await _refuse(session, None, "frames are JSON text")
            continue
        frame = _parse_frame(text)
        if isinstance(frame, str):
            await _refuse(session, None, frame)
            continue
        kind = frame["type"]
        if kind == "credit":
            n = frame.get("n")
            if type(n) is int and 0 <= n <= CREDIT_MAX:
                session.grant(n)
            else:
                await _refuse(session, frame.get("id"), f"credit n is 0 to {CREDIT_MAX}")
        elif kind in ("ack", "nak", "term", "read"):
            await session.send(await settle_frame(session, kind, frame))
        elif kind == "auth":
            if not await session.reauthenticate(frame):
                return
        elif kind == "ping":
            await session.send({"type": "pong", "id": frame.get("id")})
        elif kind != "pong":
            await _refuse(session, frame.get("id"), f"no frame type {kind[:40]!r}")


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
