"""The embedded NATS server's JetStream storage limit: every stream with ``max_bytes`` reserves
that much at creation, so the limit decides how many such streams a server accepts; the
embedded default does not depend on the free disk."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import nats
import pytest
from nats.js.api import StreamConfig
from nats.js.errors import APIError
from platformkit.nats.embedded import DEFAULT_MAX_FILE_STORE, EmbeddedNats, EmbeddedNatsError
from platformkit.testing.services import free_port

GIB = 1 << 30


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[Callable[..., str]]:
    started: list[EmbeddedNats] = []

    def start(max_file_store: int | None = DEFAULT_MAX_FILE_STORE) -> str:
        srv = EmbeddedNats(
            store_dir=tmp_path / str(len(started)), port=free_port(), max_file_store=max_file_store
        )
        started.append(srv)
        return srv.start()

    yield start
    for srv in started:
        srv.stop()


async def add_streams(url: str, count: int) -> int:
    """How many of ``count`` streams of 1 GiB the server accepts."""
    nc = await nats.connect(url)
    try:
        js = nc.jetstream()
        for n in range(count):
            try:
                await js.add_stream(StreamConfig(name=f"S{n}", subjects=[f"s{n}"], max_bytes=GIB))
            except APIError:
                return n
        return count
    finally:
        await nc.close()


async def test_the_limit_bounds_the_streams_reserved(server: Callable[..., str]) -> None:
    assert await add_streams(server(3 * GIB), 5) == 3


async def test_the_embedded_default_reserves_beyond_the_free_disk(
    server: Callable[..., str],
) -> None:
    """More 1 GiB streams than this disk has free gigabytes (a fresh machine here: 53-80)."""
    assert await add_streams(server(), 200) == 200


def test_another_server_on_the_port_is_never_joined(tmp_path: Path) -> None:
    """The server is ours only when its INFO names the server_name we started it with:
    another store's NATS on the port, or a listener that is no NATS, is a clear error."""
    ours = EmbeddedNats(store_dir=tmp_path / "ours", port=free_port())
    url = ours.start()
    try:
        assert EmbeddedNats(store_dir=tmp_path / "ours", port=ours.port).start() == url
        other = EmbeddedNats(store_dir=tmp_path / "other", port=ours.port)
        with pytest.raises(EmbeddedNatsError, match=r"NATS server 'platformkit-\w+' listens"):
            other.start()
        assert other.process is None
    finally:
        ours.stop()
    with socket.create_server(("127.0.0.1", 0)) as listener:
        squatted = EmbeddedNats(store_dir=tmp_path / "third", port=listener.getsockname()[1])
        with pytest.raises(EmbeddedNatsError, match="something else listens"):
            squatted.start()
