"""Where encrypted payloads live: a small Protocol, over obstore for object stores (data model
§3, §4).

The embedded default is a directory, ``<config_dir>/objects``, written and read with plain file
calls (``LocalObjects``; docs/decisions/0010: obstore's local store hands each call to its
runtime's threads, which cost more than the file work itself): a send's objects are written by
one worker thread together, reads happen on the event loop. ``s3://bucket/prefix``
(or any URL obstore understands, ``file://`` included) selects obstore, for S3 and friends with
credentials from the usual environment variables. Keys are the conventions'
``tenants/ten_<hex>/payloads/YYYY/MM/DD/msg_<hex>.bin``, dated by the message id, so a retried
upload lands on the same object. Failures surface as AB-9004.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import obstore
from obstore.exceptions import NotFoundError
from obstore.store import from_url

from agentbus.gateway.domain.errors import ObjectStoreUnavailable
from agentbus.gateway.domain.wire import uuid7_time
from agentbus.ids import format_id

if TYPE_CHECKING:
    from obstore.store import ClientConfig, RetryConfig

_READ_CHUNK = 1 << 20


class ObjectMissing(LookupError):
    """No object under that key (expired by retention, or never written)."""


class ObjectStore(Protocol):
    description: str
    """Where the objects are, for logs (``local:<dir>``, the configured URL)."""

    async def put_many(self, objects: list[tuple[str, bytes]]) -> None:
        """Every (key, data) stored when it returns; the first failure raises."""
        ...

    async def get(self, key: str) -> bytes: ...

    async def delete_many(self, keys: list[str]) -> None:
        """Every key gone when it returns (one already gone is fine); a failure raises."""
        ...


class ObstoreObjects:
    """An ``ObjectStore`` on any obstore store."""

    def __init__(self, store: obstore.store.ObjectStore, description: str) -> None:
        self._store = store
        self.description = description

    def __repr__(self) -> str:
        return f"ObstoreObjects({self.description})"

    async def _put(self, key: str, data: bytes) -> None:
        try:
            await obstore.put_async(self._store, key, data)
        except Exception as exc:
            raise ObjectStoreUnavailable(f"storing {key} failed") from exc

    async def put_many(self, objects: list[tuple[str, bytes]]) -> None:
        await asyncio.gather(*(self._put(key, data) for key, data in objects))

    async def get(self, key: str) -> bytes:
        try:
            result = await obstore.get_async(self._store, key)
            return bytes(await result.bytes_async())
        except (NotFoundError, FileNotFoundError) as exc:
            raise ObjectMissing(key) from exc
        except Exception as exc:
            raise ObjectStoreUnavailable(f"reading {key} failed") from exc

    async def delete_many(self, keys: list[str]) -> None:
        """One bulk call (S3's bulk delete ignores missing keys); a store that reports a
        missing key instead gets them one at a time."""
        if not keys:
            return
        try:
            await obstore.delete_async(self._store, keys)
        except (NotFoundError, FileNotFoundError):
            for key in keys:
                await self._delete_one(key)
        except Exception as exc:
            raise ObjectStoreUnavailable(f"deleting {len(keys)} objects failed") from exc

    async def _delete_one(self, key: str) -> None:
        try:
            await obstore.delete_async(self._store, key)
        except (NotFoundError, FileNotFoundError):
            return
        except Exception as exc:
            raise ObjectStoreUnavailable(f"deleting {key} failed") from exc


class LocalObjects:
    """An ``ObjectStore`` in a directory (created 0700, objects 0600). A put writes the object
    in place: nothing refers to a key before the row naming it commits, which is after the put
    returned, and a put is repeated whole (same key, same bytes) when a send is retried."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.description = f"local:{root}"
        self._dirs: set[str] = set()
        root.mkdir(parents=True, exist_ok=True, mode=0o700)

    def __repr__(self) -> str:
        return f"LocalObjects({self.root})"

    def _path(self, key: str) -> str:
        if key.startswith("/") or "\\" in key or ".." in key.split("/"):
            raise ValueError(f"not an object key: {key!r}")
        return os.path.join(self.root, key)

    def _write(self, key: str, data: bytes) -> None:
        path = self._path(key)
        try:
            folder = os.path.dirname(path)
            if folder not in self._dirs:
                os.makedirs(folder, mode=0o700, exist_ok=True)
                self._dirs.add(folder)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
            finally:
                os.close(fd)
        except OSError as exc:
            raise ObjectStoreUnavailable(f"storing {key} failed") from exc

    async def put_many(self, objects: list[tuple[str, bytes]]) -> None:
        """One hand-off to a worker thread for all of them: creating files waits on the file
        system's journal, which PostgreSQL's and NATS's syncs keep busy, and the event loop has
        other requests to serve meanwhile."""
        for key, _data in objects:
            self._path(key)  # a bad key fails here, before anything is written

        def write_all() -> None:
            for key, data in objects:
                self._write(key, data)

        await asyncio.to_thread(write_all)

    async def get(self, key: str) -> bytes:
        try:
            return _read(self._path(key))
        except FileNotFoundError as exc:
            raise ObjectMissing(key) from exc
        except OSError as exc:
            raise ObjectStoreUnavailable(f"reading {key} failed") from exc

    async def delete_many(self, keys: list[str]) -> None:
        """In a worker thread, as writes are; the day folders stay (a few hundred a year)."""
        paths = [self._path(key) for key in keys]

        def unlink_all() -> None:
            for path in paths:
                try:
                    os.unlink(path)
                except FileNotFoundError:
                    continue
                except OSError as exc:
                    raise ObjectStoreUnavailable(f"deleting {path} failed") from exc

        await asyncio.to_thread(unlink_all)


def _read(path: str) -> bytes:
    """A payload file, read on the event loop (a read of a small cached file costs less than
    a hand-off to a thread) with descriptor calls: ``open()`` would add a stat, a seek and a
    terminal check, 4 µs of the 8.5 a small object took."""
    fd = os.open(path, os.O_RDONLY)
    try:
        chunks = []
        while chunk := os.read(fd, _READ_CHUNK):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


# A send waits for its payload's put, so a store that is down or does not answer must fail it
# with AB-9004 in seconds, where obstore's defaults retry ten times over up to three minutes and
# give each request 30 s. A put larger than 5 MiB goes up in parts of that size, each a request.
REQUEST_TIMEOUT_S = 15.0
RETRIES: RetryConfig = {"max_retries": 3, "retry_timeout": timedelta(seconds=8)}


def client_options(timeout_s: float = REQUEST_TIMEOUT_S) -> ClientConfig:
    """The timeouts, and ``AWS_ALLOW_HTTP`` (an endpoint without TLS, such as a local MinIO),
    which obstore reads from the environment only when it is given no client options."""
    options: ClientConfig = {
        "connect_timeout": timedelta(seconds=min(2.0, timeout_s)),
        "timeout": timedelta(seconds=timeout_s),
    }
    if allow := os.environ.get("AWS_ALLOW_HTTP"):
        options["allow_http"] = allow.strip().lower() == "true"
    return options


def open_object_store(
    url: str | None, local_dir: Path, timeout_s: float = REQUEST_TIMEOUT_S
) -> ObjectStore:
    """The configured store (each request within ``timeout_s``), or the local directory when
    ``url`` is unset."""
    if url is None:
        return LocalObjects(local_dir)
    store = from_url(url, client_options=client_options(timeout_s), retry_config=RETRIES)
    return ObstoreObjects(store, url.split("?", 1)[0])


def payload_key(tenant_id: uuid.UUID, msg_id: uuid.UUID) -> str:
    day = uuid7_time(msg_id).strftime("%Y/%m/%d")
    return f"tenants/{format_id('ten', tenant_id)}/payloads/{day}/{format_id('msg', msg_id)}.bin"
