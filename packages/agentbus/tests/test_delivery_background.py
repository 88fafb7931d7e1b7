"""The delivery router's lifespan inside the gateway's: it installs the task rules on the send
path, builds the delivery service, and with ``background`` on runs the sweepers and the
dlq-worker (which creates the advisory stream), stopping them cleanly at shutdown."""

from __future__ import annotations

import asyncio

from agentbus.delivery.dlq import STREAM
from agentbus.delivery.service import DeliveryService
from agentbus.gateway.app import create_app
from agentbus.gateway.config import GatewaySettings
from agentbus.gateway.context import Gateway
from agentbus.tasks.hooks import TaskService
from asgi_lifespan import LifespanManager


async def test_background_work_starts_and_stops_with_the_app(
    gateway_settings: GatewaySettings,
) -> None:
    app = create_app(gateway_settings.model_copy(update={"background": True}))
    async with LifespanManager(app, startup_timeout=30, shutdown_timeout=30):
        gw: Gateway = app.state.gateway
        assert isinstance(gw.task_rules, TaskService)
        assert isinstance(app.state.delivery, DeliveryService)
        for _ in range(50):  # the worker creates its stream in the background
            try:
                await gw.broker.js.stream_info(STREAM)
                break
            except Exception:
                await asyncio.sleep(0.1)
        info = await gw.broker.js.stream_info(STREAM)
        assert info.config.subjects == ["$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.>"]
