"""Pytest fixtures for the gateway: the app on a fresh database (``agentbus_db``) and the
session's NATS (``nats_url``), its ``Gateway``, and an HTTP client bound to it in-process, and
``acme_agents``: tenant ``acme`` with alice and bob registered through the API; an S3
endpoint of the session (moto's S3 server, a development dependency, in a process of its own)
and a fresh bucket on it (``s3_url``); and ``TcpGate``, a forwarder a test cuts and restores to
take a server away from the gateway without losing its data.

Use with ``pytest_plugins = ["agentbus.testing", "agentbus.gateway.testing"]``; the helpers
tests call (``make_world``, ``enroll``, ``SimAgent``) are in ``agentbus.gateway.testkit``.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from asgi_lifespan import LifespanManager
from fastapi import FastAPI
from platformkit.testing.s3 import S3Server, aim
from platformkit.testing.services import free_port

from agentbus.gateway.app import create_app
from agentbus.gateway.config import GatewaySettings
from agentbus.gateway.context import Gateway
from agentbus.gateway.testkit import SimAgent, World, alice_and_bob

__all__ = ["S3Server", "TcpGate", "aim"]


@pytest.fixture
def gateway_settings(tmp_path: Path, agentbus_db: str, nats_url: str) -> GatewaySettings:
    return GatewaySettings(
        database_url=agentbus_db,
        nats_url=nats_url,
        config_dir=tmp_path / "config",
        background=False,
        analytics=False,  # chDB is one data path per process: analytics tests open their own
    )


@contextlib.asynccontextmanager
async def serving(settings: GatewaySettings) -> AsyncIterator[tuple[FastAPI, httpx.AsyncClient]]:
    """The gateway app on ``settings``, started, and an HTTP client bound to it in-process: for
    a test whose gateway differs from ``gateway_settings``."""
    app = create_app(settings)
    async with LifespanManager(app, startup_timeout=30, shutdown_timeout=30):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://gateway.test") as client:
            yield app, client


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


@pytest.fixture
async def acme_agents(
    gateway: Gateway, gateway_client: httpx.AsyncClient
) -> tuple[World, SimAgent, SimAgent]:
    """Tenant ``acme`` with alice and bob (``testkit.alice_and_bob``)."""
    return await alice_and_bob(gateway, gateway_client)


@pytest.fixture
def s3_url(s3_server: S3Server, monkeypatch: pytest.MonkeyPatch) -> str:
    """``s3://<fresh bucket>/payloads`` on the session's S3 server."""
    return s3_server.bucket(monkeypatch)


class TcpGate:
    """Forwards ``127.0.0.1:<port>`` to ``127.0.0.1:<target>``; ``cut`` refuses new connections
    and drops the open ones, as a network partition would, until ``open`` again. ``stall``
    holds every byte in both directions (a peer that has gone slow) until ``flow``;
    ``holding`` is set once a chunk waits."""

    def __init__(self, target: int) -> None:
        self.target, self.port = target, free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._flowing = asyncio.Event()
        self._flowing.set()
        self.holding = asyncio.Event()

    def stall(self) -> None:
        self.holding.clear()
        self._flowing.clear()

    def flow(self) -> None:
        self._flowing.set()

    async def open(self) -> None:
        self._server = await asyncio.start_server(self._forward, "127.0.0.1", self.port)

    async def cut(self) -> None:
        if self._server is not None:
            self._server.close()
        for writer in list(self._writers):
            writer.close()
        if self._server is not None:
            await self._server.wait_closed()
            self._server = None

    async def _forward(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target)
        except OSError:
            writer.close()
            return
        self._writers.update((writer, up_writer))

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            with contextlib.suppress(OSError):
                while chunk := await src.read(65536):
                    if not self._flowing.is_set():
                        self.holding.set()
                        await self._flowing.wait()
                    dst.write(chunk)
                    await dst.drain()
            dst.close()

        try:
            await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))
        finally:
            self._writers.difference_update((writer, up_writer))
