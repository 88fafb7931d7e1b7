"""The simulator's HTTP client on both event loops it runs on: asyncio's (tests, the library)
and uvloop's (``strataplane simulate telegraf``), whose transports are not asyncio classes."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest
import uvloop
from strataplane.simulate.http import HttpPool, Reply


class _Answer(asyncio.Protocol):
    """Answers every request on a keep-alive connection with 200 and the same small body."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport
        self.buf = b""

    def data_received(self, data: bytes) -> None:
        self.buf += data
        while b"\r\n\r\n" in self.buf:
            _head, self.buf = self.buf.split(b"\r\n\r\n", 1)
            self.transport.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")  # type: ignore[attr-defined]


async def _three_requests() -> list[Reply]:
    loop = asyncio.get_running_loop()
    server = await loop.create_server(_Answer, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    pool = HttpPool(f"http://127.0.0.1:{port}", size=2)
    try:
        async with asyncio.timeout(10):
            return [await pool.request("GET", "/x", {"Accept": "text/plain"}) for _ in range(3)]
    finally:
        await pool.close()
        server.close()


@pytest.mark.parametrize("loop_factory", [asyncio.new_event_loop, uvloop.new_event_loop])
def test_requests_over_a_kept_alive_connection(
    loop_factory: Callable[[], asyncio.AbstractEventLoop],
) -> None:
    replies = asyncio.run(_three_requests(), loop_factory=loop_factory)
    assert [(r.status, r.body) for r in replies] == [(200, b"ok")] * 3
