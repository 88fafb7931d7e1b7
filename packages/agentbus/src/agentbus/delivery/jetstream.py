"""Pulling from an agent's durable consumer and settling deliveries by their ack subject.

A pull (05 §4, 04 §5.1) answers as soon as one delivery is ready, plus whatever else is ready at
that moment, and never leaves a pull request behind that could swallow a later message:

1. a ``no_wait`` request for up to ``batch``: whatever is pending now, ended by a status;
2. if nothing came, a lingering request for exactly **one** message that expires at the wait;
3. once that message arrives, another ``no_wait`` request for the rest, unless its ack subject
   says nothing else was pending (a message that lands later waits for the next pull, as it
   would have after step 3: the paced long-poll's usual case, one round trip fewer).

Every request goes to a fresh inbox that is unsubscribed at the end; the server drops waiting
requests whose reply subject lost interest, so an abandoned long-poll releases its request, and
copies that reached the inbox but are not returned are naked without delay.

Settling uses the reply subject alone, so any gateway instance can settle any delivery: an
ack is ``+ACK``, a nak ``-NAK {"delay": ns}``, a refusal ``+TERM``, published (``settle_quietly``);
``ack`` waits for JetStream's reply (request/reply, 2 s), for the advisory consumer of
``delivery.dlq``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any

from nats.aio.client import Client
from nats.aio.msg import Msg

from agentbus.delivery.domain import MAX_WAIT_S
from agentbus.delivery.tokens import InvalidAckToken, parse_ack_subject

STATUS = "Status"
NO_RESPONDERS = "503"
_DRAIN_TIMEOUT_S = 2.0


class ConsumerMissing(Exception):
    """Nobody answers the consumer's pull subject: the consumer does not exist (any more)."""


def is_status(msg: Msg) -> bool:
    """A JetStream status message (no more messages, request expired, ...), not a delivery;
    raises ConsumerMissing on "no responders"."""
    status = msg.headers.get(STATUS) if msg.headers else None
    if status == NO_RESPONDERS:
        raise ConsumerMissing(msg.subject)
    return bool(status)


async def _request(nc: Client, subject: str, inbox: str, body: dict[str, Any]) -> None:
    await nc.publish(subject, json.dumps(body).encode(), reply=inbox)


async def _drain(
    nc: Client, subject: str, inbox: str, queue: asyncio.Queue[Msg], batch: int, max_bytes: int
) -> list[Msg]:
    """Step 1 and 3: what is pending now, up to ``batch`` and about ``max_bytes``."""
    await _request(nc, subject, inbox, {"batch": batch, "max_bytes": max_bytes, "no_wait": True})
    got: list[Msg] = []
    while len(got) < batch:
        try:
            msg = await asyncio.wait_for(queue.get(), _DRAIN_TIMEOUT_S)
        except TimeoutError:
            break
        if is_status(msg):
            break
        got.append(msg)
    return got


async def pull(
    nc: Client,
    stream: str,
    consumer: str,
    *,
    batch: int,
    max_bytes: int,
    wait_s: float,
    stop: asyncio.Event | None = None,
) -> list[Msg]:
    """Up to ``batch`` deliveries; waits up to ``wait_s`` for the first one. ``stop`` ends the
    wait early (connection replaced, gateway draining)."""
    subject = f"$JS.API.CONSUMER.MSG.NEXT.{stream}.{consumer}"
    inbox = nc.new_inbox()
    queue: asyncio.Queue[Msg] = asyncio.Queue()

    async def on_msg(msg: Msg) -> None:
        await queue.put(msg)

    sub = await nc.subscribe(inbox, cb=on_msg)
    try:
        got = await _drain(nc, subject, inbox, queue, batch, max_bytes)
        wait_s = min(wait_s, MAX_WAIT_S)
        if got or wait_s <= 0:
            return got
        expires_ns = max(int(wait_s * 1e9) - 50_000_000, 10_000_000)
        await _request(nc, subject, inbox, {"batch": 1, "expires": expires_ns})
        first = await _first(queue, wait_s + 1.0, stop)
        if first is None:
            return []
        if batch <= 1 or _nothing_pending_after(first):
            return [first]
        return [first, *await _drain(nc, subject, inbox, queue, batch - 1, max_bytes)]
    finally:
        with contextlib.suppress(Exception):
            await sub.unsubscribe()
        await _release(nc, queue)


def _nothing_pending_after(msg: Msg) -> bool:
    """The consumer had nothing else pending when it delivered ``msg`` (the last field of its
    ack subject); False when the subject does not say."""
    try:
        return parse_ack_subject(msg.reply or "").pending == 0
    except InvalidAckToken:
        return False


async def _release(nc: Client, queue: asyncio.Queue[Msg]) -> None:
    """Copies that reached this pull's inbox but are not returned (``stop`` came first, or one
    answered a drain after its timeout): nak them without delay rather than leave them pending
    until AckWait."""
    while not queue.empty():
        msg = queue.get_nowait()
        if msg.reply and not (msg.headers and msg.headers.get(STATUS)):
            with contextlib.suppress(Exception):
                await nak(nc, msg.reply, 0)


async def _first(
    queue: asyncio.Queue[Msg], within_s: float, stop: asyncio.Event | None
) -> Msg | None:
    """The lingering request's message; None on its expiry status, a timeout, or ``stop``."""
    getter = asyncio.ensure_future(queue.get())
    waiters: set[asyncio.Future[Any]] = {getter}
    stopper = asyncio.ensure_future(stop.wait()) if stop is not None else None
    if stopper is not None:
        waiters.add(stopper)
    try:
        done, _ = await asyncio.wait(waiters, timeout=within_s, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for fut in waiters:
            fut.cancel()
    if getter in done and not getter.cancelled():
        msg = getter.result()
        return None if is_status(msg) else msg
    return None


async def ack(nc: Client, reply: str, within_s: float = 2.0) -> bool:
    """Confirmed ack; False when JetStream did not answer (PostgreSQL already holds the fact)."""
    try:
        await nc.request(reply, b"+ACK", timeout=within_s)
    except Exception:
        return False
    return True


async def nak(nc: Client, reply: str, delay_ms: int) -> None:
    payload = (
        b"-NAK"
        if delay_ms <= 0
        else b"-NAK " + json.dumps({"delay": delay_ms * 1_000_000}).encode()
    )
    await nc.publish(reply, payload)


async def term(nc: Client, reply: str) -> None:
    await nc.publish(reply, b"+TERM")


async def settle_quietly(nc: Client, reply: str, verb: str, delay_ms: int = 0) -> None:
    """Best effort, for copies the gateway drops itself: AckWait covers a lost settle."""
    with contextlib.suppress(Exception):
        if verb == "ack":
            await nc.publish(reply, b"+ACK")
        elif verb == "nak":
            await nak(nc, reply, delay_ms)
        else:
            await term(nc, reply)
