"""``send`` frames on the delivery WebSocket (04-API-SPEC.md §5.2): ``{"type": "send", "id",
"envelopes": [...]}``, the body of ``POST /v1/messages/batch`` (§4.7) with the frame's own
members, answered by a ``result`` frame (``for`` = the frame's ``id``) that carries exactly the
route's answer: one result per envelope, in order.

The frame goes through what the route does, in the route's order: the caller is checked again
as every HTTP send is (the credential and the agent's current state, then the ``send`` scope,
AB-1007 for a socket opened with ``receive`` alone), then the body's shape (a duplicate key or a
non-finite number anywhere: AB-2001; AB-5009 past 100 envelopes), then
``gateway.api.send.answer_batch``. Envelopes take from the sender's send bucket inside the send
action, as over HTTP (a batch request takes no token of the agent's request bucket). What fails
the request over HTTP (AB-2001, AB-5009, a dependency down: AB-9xxx, PostgreSQL unreachable:
AB-9002) is the frame's ``problem``; the socket stays open either way.

A send frame runs as a task of its own, so deliveries, settle frames, pings and statuses go on
while its transaction and publishes run; at most ``frames.SENDS_IN_FLIGHT`` at once per socket.
Answers are matched by ``for``, so they may come in another order than the frames: a client that
keeps a lane in order sends the lane's next batch after the answer to the previous one, as over
HTTP. When the socket ends, the sends already taken are finished (their answer may find no one
to read it; sending the same envelopes again is answered as their replay).
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from agentbus.delivery.frames import Session, problem_of, refusal
from agentbus.gateway.api.auth import principal_from_credential, require_agent_scope
from agentbus.gateway.api.send import answer_batch
from agentbus.gateway.domain.envelope import batch_items, refuse_flaw

FRAME_MEMBERS = ("type", "id")
"""What a ``send`` frame holds besides the batch body."""


async def start(session: Session, frame: dict[str, Any], flaw: str | None) -> None:
    """Run a ``send`` frame beside the socket's other work (``flaw``: what ``read_json`` found
    in the frame's text); waits while ``SENDS_IN_FLIGHT`` already run."""
    await session.send_slots.acquire()
    task = asyncio.create_task(_answer(session, frame, flaw))
    session.sends.add(task)
    task.add_done_callback(session.sends.discard)


async def finish(session: Session) -> None:
    """Wait for the send frames still running (the socket has ended)."""
    await asyncio.gather(*session.sends, return_exceptions=True)


async def _answer(session: Session, frame: dict[str, Any], flaw: str | None) -> None:
    try:
        answer = await send_frame(session, frame, flaw)
        with contextlib.suppress(Exception):  # the socket may have closed meanwhile
            await session.send(answer)
    finally:
        session.send_slots.release()


async def send_frame(session: Session, frame: dict[str, Any], flaw: str | None) -> dict[str, Any]:
    """A ``send`` frame's ``result`` frame."""
    gw = session.svc.gateway
    try:
        who = require_agent_scope(await principal_from_credential(gw, session.credential), "send")
        refuse_flaw(flaw)
        body = {k: v for k, v in frame.items() if k not in FRAME_MEMBERS}
        answer = await answer_batch(gw, who, batch_items(body), session.ws.url.path)
    except Exception as exc:
        return {"type": "result", "for": frame.get("id"), "problem": problem_of(refusal(exc))}
    return {"type": "result", "for": frame.get("id"), **answer}
