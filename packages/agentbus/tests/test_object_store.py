"""The payload store's contract, on the embedded directory and through obstore (a ``file://``
URL, and an S3 bucket on a real S3 server): what is put is got back byte for byte, a put under
the same key replaces the object, a missing key is ``ObjectMissing``, a delete is idempotent; the
directory's objects are private to the gateway's user; an S3 endpoint that is down or does not
answer fails a put in seconds."""

from __future__ import annotations

import os
import socket
import stat
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from agentbus.gateway.domain.errors import ObjectStoreUnavailable
from agentbus.gateway.store.objectstore import (
    LocalObjects,
    ObjectMissing,
    ObjectStore,
    client_options,
    open_object_store,
)
from agentbus.gateway.testing import aim
from platformkit.testing.services import free_port

KEY = "tenants/ten_0a/payloads/2026/11/30/msg_0b.bin"


@pytest.fixture(params=["local", "obstore", "s3"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> ObjectStore:
    if request.param == "local":
        return open_object_store(None, tmp_path / "objects")
    if request.param == "s3":
        return open_object_store(request.getfixturevalue("s3_url"), tmp_path / "unused")
    (tmp_path / "bucket").mkdir()
    return open_object_store(f"file://{tmp_path / 'bucket'}", tmp_path / "unused")


async def test_put_get_replace_delete(store: ObjectStore) -> None:
    await store.put_many([(KEY, b"\x00sealed bytes\xff")])
    assert await store.get(KEY) == b"\x00sealed bytes\xff"
    await store.put_many([(KEY, b"retried")])  # a retried send writes the same key again
    assert await store.get(KEY) == b"retried"
    for size in (300 * 1024, 3 * 1024 * 1024 + 7):  # one read and several
        large = os.urandom(size)
        await store.put_many([(KEY + ".large", large)])
        assert await store.get(KEY + ".large") == large
    await store.delete_many([KEY])
    with pytest.raises(ObjectMissing):
        await store.get(KEY)
    await store.delete_many([KEY])  # gone already: nothing to do
    many = [(f"{KEY}.{n}", bytes([n]) * 100) for n in range(20)]
    await store.put_many(many)
    assert [await store.get(key) for key, _ in many] == [data for _, data in many]
    await store.delete_many([KEY, *(key for key, _ in many[:10])])  # one already gone
    for key, data in many:
        if key in dict(many[:10]):
            with pytest.raises(ObjectMissing):
                await store.get(key)
        else:
            assert await store.get(key) == data
    await store.delete_many([])


def test_the_default_is_the_directory_store(tmp_path: Path) -> None:
    assert isinstance(open_object_store(None, tmp_path / "objects"), LocalObjects)


async def test_the_directory_keeps_objects_private(tmp_path: Path) -> None:
    store = LocalObjects(tmp_path / "objects")
    await store.put_many([(KEY, b"x")])
    assert stat.S_IMODE((tmp_path / "objects").stat().st_mode) == 0o700
    assert stat.S_IMODE((tmp_path / "objects" / KEY).stat().st_mode) == 0o600


async def test_the_directory_refuses_keys_outside_it(tmp_path: Path) -> None:
    store = LocalObjects(tmp_path / "objects")
    for key in ("../escape.bin", "/etc/passwd", "tenants/../../escape.bin"):
        with pytest.raises(ValueError, match="not an object key"):
            await store.put_many([(key, b"x")])
        with pytest.raises(ValueError, match="not an object key"):
            await store.put_many([(KEY, b"fine"), (key, b"x")])
    assert not (tmp_path / "escape.bin").exists()
    assert not (tmp_path / "objects" / KEY).exists(), "a bad key stops the batch before writes"


async def test_a_failing_directory_is_object_store_unavailable(tmp_path: Path) -> None:
    store = LocalObjects(tmp_path / "objects")
    (tmp_path / "objects" / "tenants").write_bytes(b"a file where a folder must be")
    with pytest.raises(ObjectStoreUnavailable):
        await store.put_many([(KEY, b"x")])


@pytest.fixture
def silent_endpoint() -> Iterator[str]:
    """A port that accepts connections and never answers, as a hung server does."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"


@pytest.mark.parametrize("server", ["down", "silent"])
async def test_an_s3_endpoint_that_is_down_or_silent_fails_a_put_in_seconds(
    server: str,
    silent_endpoint: str,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    aim(monkeypatch, silent_endpoint if server == "silent" else f"http://127.0.0.1:{free_port()}")
    store = open_object_store("s3://nowhere/payloads", tmp_path / "unused", timeout_s=1.0)
    started = time.monotonic()
    with pytest.raises(ObjectStoreUnavailable):
        await store.put_many([(KEY, b"x")])
    # four tries of at most a second, with backoff between them; obstore's own defaults retry
    # ten times over up to three minutes, 30 s per request
    assert time.monotonic() - started < 8


def test_plain_http_endpoints_stay_allowed_beside_the_timeouts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("AWS_ALLOW_HTTP", raising=False)
    assert "allow_http" not in client_options()
    monkeypatch.setenv("AWS_ALLOW_HTTP", "true")
    assert client_options()["allow_http"] is True
    assert client_options()["timeout"] == timedelta(seconds=15)
