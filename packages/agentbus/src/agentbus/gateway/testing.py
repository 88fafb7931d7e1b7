"""Pytest fixtures for the gateway: the app on a fresh database (``agentbus_db``) and the
session's NATS (``nats_url``), its ``Gateway``, and an HTTP client bound to it in-process.

Use with ``pytest_plugins = ["agentbus.testing", "agentbus.gateway.testing"]``; the helpers
tests call (``make_world``, ``enroll``, ``SimAgent``) are in ``agentbus.gateway.testkit``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from asgi_lifespan import LifespanManager
from fastapi import FastAPI

from agentbus.gateway.app import create_app
from agentbus.gateway.config import GatewaySettings
from agentbus.gateway.context import Gateway


@pytest.fixture
def gateway_settings(tmp_path: Path, agentbus_db: str, nats_url: str) -> GatewaySettings:
    return GatewaySettings(
        database_url=agentbus_db,
        nats_url=nats_url,
        config_dir=tmp_path / "config",
        background=False,
    )


@pytest.fixture
async def gateway_app(gateway_settings: GatewaySettings) -> AsyncIterator[FastAPI]:
    app = create_app(gateway_settings)
    async with LifespanManager(app, startup_timeout=30, shutdown_timeout=30):
        yield app


@pytest.fixture
def gateway(gateway_app: FastAPI) -> Gateway:
    gw: Gateway = gateway_app.state.gateway
    return gw


@pytest.fixture
async def gateway_client(gateway_app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=gateway_app)
    async with httpx.AsyncClient(transport=transport, base_url="http://gateway.test") as client:
        yield client
