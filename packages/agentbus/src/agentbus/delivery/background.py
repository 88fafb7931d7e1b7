"""Delivery's part of the gateway lifespan: the task rules on the send path, the delivery
service (ended open connections when the server announces its stop, and the answers to other
processes' reads of copies handed out here, ``handoff``), and (when the gateway
runs background work) the loops ``messages.expire``,
``dlq.sweep`` and ``tasks.expire`` and the ``dlq-worker`` advisory consumer."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from platformkit.http import drain
from platformkit.jobs import LeaderLoop

from agentbus.delivery import handoff
from agentbus.delivery.dlq import DeadLetterWorker
from agentbus.delivery.service import build_service
from agentbus.delivery.sweeper import sweeper_loops
from agentbus.gateway.context import Gateway
from agentbus.tasks.hooks import install
from agentbus.tasks.sweeper import tasks_expire_loop


@asynccontextmanager
async def background(app: Any) -> AsyncIterator[None]:
    gw = getattr(app.state, "gateway", None)
    if not isinstance(gw, Gateway):  # an app without the gateway lifespan (tests of routes)
        yield
        return
    install(gw)
    app.state.delivery = service = build_service(gw)
    unwatch = drain.watch(service.drain)
    loops: list[LeaderLoop] = []
    worker: DeadLetterWorker | None = None
    if gw.settings.background:
        loops = [*sweeper_loops(gw.pool, gw.broker), tasks_expire_loop(gw.pool)]
        worker = DeadLetterWorker(gw.pool, gw.broker)
        for loop in loops:
            await loop.start()
        await worker.start()
    try:
        async with handoff.listening(service):
            yield
    finally:
        if unwatch is not None:
            unwatch()
        if worker is not None:
            await worker.stop()
        for loop in loops:
            with contextlib.suppress(Exception):
                await loop.stop()
