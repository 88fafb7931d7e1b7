"""The long-poll's client (04 §5.1): a poll whose client has gone stops waiting at once, and the
copies pulled for it at that moment are handed back to JetStream (nak without delay), so the
next poll gets them instead of waiting out the consumer's AckWait (30 s).

A copy whose answer was already on its way when the client went is not noticed here; AckWait
redelivers it, and the sidecar's inbox recognises it if it had stored it after all.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

from starlette.requests import Request

from agentbus.delivery import jetstream
from agentbus.delivery.service import DeliveryService, nats_client
from agentbus.gateway.api.principals import AgentPrincipal
from agentbus.gateway.domain.errors import BrokerUnavailable
from agentbus.ids import parse_id


@contextlib.asynccontextmanager
async def watch_client(request: Request, ended: asyncio.Event) -> AsyncIterator[asyncio.Event]:
    """Yields ``gone``, set (with ``ended``) when the server reports the client disconnected."""
    gone = asyncio.Event()

    async def watch() -> None:
        while (await request.receive())["type"] != "http.disconnect":
            continue  # the (empty) request body of the GET
        gone.set()
        ended.set()

    watcher = asyncio.create_task(watch())
    try:
        yield gone
    finally:
        watcher.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await watcher


async def hand_back(
    svc: DeliveryService, who: AgentPrincipal, deliveries: list[dict[str, Any]]
) -> None:
    """Nak without delay the copies of an answer nobody will read (best effort: AckWait covers
    a lost nak)."""
    try:
        nc = nats_client(svc.gateway.broker)
    except BrokerUnavailable:
        return
    for delivery in deliveries:
        msg_id = parse_id("msg", str(delivery["msg_id"]))
        reply = svc.take_handed(who.tenant_id, who.agent_id, msg_id)
        if reply is not None:
            await jetstream.settle_quietly(nc, reply, "nak")
