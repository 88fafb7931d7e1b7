"""Where encrypted payloads live: a small Protocol over obstore (data model §3, §4).

``LocalStore`` under ``<config_dir>/objects`` is the embedded default; ``s3://bucket/prefix``
(or any URL obstore understands) selects S3 and friends, with credentials from the usual
environment variables. Keys are the conventions' ``tenants/ten_<hex>/payloads/YYYY/MM/DD/
msg_<hex>.bin``, dated by the message id, so a retried upload lands on the same object.
Failures surface as AB-9004.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Protocol

import obstore
from obstore.exceptions import NotFoundError
from obstore.store import LocalStore, from_url

from agentbus.gateway.errors import ObjectStoreUnavailable
from agentbus.gateway.wire import uuid7_time
from agentbus.ids import format_id


class ObjectMissing(LookupError):
    """No object under that key (expired by retention, or never written)."""


class ObjectStore(Protocol):
    async def put(self, key: str, data: bytes) -> None: ...

    async def get(self, key: str) -> bytes: ...

    async def delete(self, key: str) -> None: ...


class ObstoreObjects:
    """An ``ObjectStore`` on any obstore store."""

    def __init__(self, store: obstore.store.ObjectStore, description: str) -> None:
        self._store = store
        self.description = description

    def __repr__(self) -> str:
        return f"ObstoreObjects({self.description})"

    async def put(self, key: str, data: bytes) -> None:
        try:
            await obstore.put_async(self._store, key, data)
        except Exception as exc:
            raise ObjectStoreUnavailable(f"storing {key} failed") from exc

    async def get(self, key: str) -> bytes:
        try:
            result = await obstore.get_async(self._store, key)
            return bytes(await result.bytes_async())
        except (NotFoundError, FileNotFoundError) as exc:
            raise ObjectMissing(key) from exc
        except Exception as exc:
            raise ObjectStoreUnavailable(f"reading {key} failed") from exc

    async def delete(self, key: str) -> None:
        try:
            await obstore.delete_async(self._store, key)
        except (NotFoundError, FileNotFoundError):
            return
        except Exception as exc:
            raise ObjectStoreUnavailable(f"deleting {key} failed") from exc


def open_object_store(url: str | None, local_dir: Path) -> ObjectStore:
    """The configured store, or a local directory (created 0700) when ``url`` is unset."""
    if url is None:
        local_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        return ObstoreObjects(LocalStore(prefix=local_dir), f"local:{local_dir}")
    return ObstoreObjects(from_url(url), url.split("?", 1)[0])


def payload_key(tenant_id: uuid.UUID, msg_id: uuid.UUID) -> str:
    day = uuid7_time(msg_id).strftime("%Y/%m/%d")
    return f"tenants/{format_id('ten', tenant_id)}/payloads/{day}/{format_id('msg', msg_id)}.bin"
