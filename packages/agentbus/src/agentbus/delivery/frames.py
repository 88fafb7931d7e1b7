"""The state of one delivery WebSocket and its client frames: credit, serialised writes, the
credential (refreshed by ``auth`` frames), the ``send`` frames in flight
(``delivery.send_frames``), and settle frames answered as ``result``."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from platformkit import fastjson
from platformkit.db.outage import database_unreachable
from pydantic import BaseModel
from starlette.websockets import WebSocket

from agentbus.delivery import bodies, settle
from agentbus.delivery.service import DeliveryService
from agentbus.errors import AgentBusError, DatabaseUnavailable
from agentbus.gateway.api.auth import principal_from_credential
from agentbus.gateway.api.bodies import parse_model
from agentbus.gateway.api.principals import AgentPrincipal

log = logging.getLogger(__name__)

_MODELS: dict[str, type[BaseModel]] = {
    "ack": bodies.Acks,
    "nak": bodies.Naks,
    "term": bodies.Terms,
    "read": bodies.Reads,
}
_KEYS = {"ack": "acks", "nak": "naks", "term": "terms", "read": "reads"}
SENDS_IN_FLIGHT = 4
"""``send`` frames of one socket that run at once; the socket reads no further frame while
that many run. A sidecar has one in flight (a lane's next batch waits for the answer)."""


def problem_of(exc: AgentBusError) -> dict[str, Any]:
    body: dict[str, Any] = {
        "type": exc.type_uri, "title": exc.title, "status": exc.status, "code": exc.code,
    }  # fmt: skip
    if exc.detail:
        body["detail"] = exc.detail
    return body | exc.data


def refusal(exc: Exception) -> AgentBusError:
    """What a frame that failed is answered with, as its HTTP route would be: the error's own
    problem, AB-9002 when PostgreSQL is unreachable (or no pooled connection came in time),
    AB-9001 for anything else (logged, not told). The socket goes on either way."""
    if isinstance(exc, AgentBusError):
        return exc
    if database_unreachable(exc):
        return DatabaseUnavailable("PostgreSQL did not answer; retry with backoff")
    log.error("a frame failed", exc_info=exc)
    return AgentBusError()


class Session:
    def __init__(
        self,
        ws: WebSocket,
        svc: DeliveryService,
        who: AgentPrincipal,
        credential: str,
        *,
        batched: bool,
    ) -> None:
        self.ws, self.svc, self.who = ws, svc, who
        self.credential = credential  # ``who``'s, checked again for every ``send`` frame
        self.batched = batched  # deliveries of one pull in one frame
        self.credit = 0
        self.credit_available = asyncio.Event()
        self.close_code = 1000
        self.sends: set[asyncio.Task[None]] = set()
        self.send_slots = asyncio.Semaphore(SENDS_IN_FLIGHT)
        self._write = asyncio.Lock()

    async def send(self, frame: dict[str, Any]) -> None:
        text = fastjson.dumps(frame)
        async with self._write:
            await self.ws.send_text(text if isinstance(text, str) else text.decode())

    def grant(self, n: int) -> None:
        self.credit += n
        if self.credit > 0:
            self.credit_available.set()

    def take(self, n: int) -> None:
        self.credit = max(0, self.credit - n)
        if self.credit == 0:
            self.credit_available.clear()

    async def reauthenticate(self, frame: dict[str, Any]) -> bool:
        """Swap in a refreshed credential of the same agent; False closes with 4401."""
        try:
            who = await principal_from_credential(self.svc.gateway, str(frame.get("token")))
        except AgentBusError:
            self.close_code = 4401
            return False
        if (who.tenant_id, who.agent_id) != (self.who.tenant_id, self.who.agent_id):
            self.close_code = 4401
            return False
        self.who, self.credential = who, str(frame.get("token"))
        await self.send({"type": "result", "for": frame.get("id"), "results": []})
        return True


async def settle_frame(session: Session, kind: str, frame: dict[str, Any]) -> dict[str, Any]:
    """Run an ack, nak, term or read frame; its ``result`` frame (a failure's ``problem``:
    ``refusal``)."""
    body_doc = {_KEYS[kind]: frame.get(_KEYS[kind])}
    try:
        body = parse_model(_MODELS[kind], bodies.dump(body_doc))
        svc, who = session.svc, session.who
        if isinstance(body, bodies.Reads):
            items = [settle.check(svc, who, i, None) for i in bodies.read_items(body)]
            results = await settle.read(svc, who, items)
        else:
            items = bodies.checked_items(svc, who, list(getattr(body, _KEYS[kind])))
            results = await getattr(settle, kind)(svc, who, items)
    except Exception as exc:
        return {"type": "result", "for": frame.get("id"), "problem": problem_of(refusal(exc))}
    return {"type": "result", "for": frame.get("id"), "results": results}
