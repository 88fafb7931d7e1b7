"""Reads of copies another process handed out (05 §4 step 6).

A read of a ``fetched`` message fills its transport ack, so its JetStream copy is acked too. Only
the process that handed the copy out knows its ack subject (``DeliveryService.handed``). A read
that reaches another process (a second granian worker, a client that opens a new connection per
request) asks the others on a core NATS subject per agent, outside every tenant stream, after
its commit; whichever holds the copy acks it. Without the question the copy waited for AckWait
(30 s) and then for triage to drop it, and an agent with strict ordering (``max_ack_pending``
1) got nothing else meanwhile.

The question carries message ids only, and is asked only for rows the read just moved to
``read``; a process acks only copies it handed out to that agent within AckWait. NATS is the
gateway's own infrastructure, as for the connection and status subjects.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import AsyncIterator, Iterable

from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription

from agentbus.delivery import jetstream
from agentbus.delivery.service import DeliveryService, nats_client
from agentbus.gateway.domain.errors import BrokerUnavailable

log = logging.getLogger(__name__)

ROOT = "agentbus.delivery.handed"
_CONNECT_POLL_S = 0.5


def handed_subject(tenant_id: uuid.UUID, agent_id: uuid.UUID) -> str:
    return f"{ROOT}.{tenant_id.hex}.{agent_id.hex}"


def encode(msg_ids: Iterable[uuid.UUID]) -> bytes:
    return b",".join(msg_id.hex.encode() for msg_id in msg_ids)


def decode(subject: str, data: bytes) -> tuple[uuid.UUID, uuid.UUID, list[uuid.UUID]] | None:
    """(tenant, agent, message ids) of a question, or None for anything malformed."""
    prefix, _, rest = subject.rpartition(".")
    root, _, tenant = prefix.rpartition(".")
    if root != ROOT:
        return None
    try:
        ids = [uuid.UUID(hex=part.decode()) for part in data.split(b",")] if data else []
        return uuid.UUID(hex=tenant), uuid.UUID(hex=rest), ids
    except ValueError:
        return None


async def ask_others(
    nc: Client, tenant_id: uuid.UUID, agent_id: uuid.UUID, msg_ids: list[uuid.UUID]
) -> None:
    """Best effort, on the caller's connection: a lost question costs the copy its AckWait,
    which triage then drops."""
    if not msg_ids:
        return
    with contextlib.suppress(Exception):
        await nc.publish(handed_subject(tenant_id, agent_id), encode(msg_ids))


async def answer(svc: DeliveryService, subject: str, data: bytes) -> int:
    """Ack the asked copies this process handed out; how many it acked."""
    asked = decode(subject, data)
    if asked is None:
        log.warning("ignored a malformed question on %s", subject)
        return 0
    tenant_id, agent_id, msg_ids = asked
    replies = [r for m in msg_ids if (r := svc.take_handed(tenant_id, agent_id, m)) is not None]
    if replies:
        nc = nats_client(svc.gateway.broker)
        for reply in replies:
            await jetstream.settle_quietly(nc, reply, "ack")
    return len(replies)


@contextlib.asynccontextmanager
async def listening(svc: DeliveryService) -> AsyncIterator[None]:
    """Answer the other processes' questions while the lifespan runs. The broker connects in
    the background, so the subscription is made once it has (the NATS client keeps it across
    reconnects)."""

    async def on_question(msg: Msg) -> None:
        with contextlib.suppress(BrokerUnavailable):
            await answer(svc, msg.subject, msg.data)

    async def subscribe() -> Subscription:
        while True:
            with contextlib.suppress(Exception):  # not connected yet, or reconnecting
                nc = nats_client(svc.gateway.broker)
                return await nc.subscribe(f"{ROOT}.*.*", cb=on_question)
            await asyncio.sleep(_CONNECT_POLL_S)

    task = asyncio.create_task(subscribe(), name="delivery-handoff")
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            sub = await task
            await sub.unsubscribe()
