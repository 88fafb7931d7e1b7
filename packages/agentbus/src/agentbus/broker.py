"""NATS JetStream for AgentBus: names, the per-tenant stream, per-agent consumers, publishing.

Names (00-CONVENTIONS.md §1.2, 05-DELIVERY-SEMANTICS.md §2.2-2.3): stream ``T_<tenant hex>``
on ``t.<tenant hex>.>``; an agent's inbox subject ``t.<tenant>.ws.<workspace>.agent.<agent>.inbox``
(bare hex digits); its durable pull consumer ``agt_<agent hex>``. Settings are the platform
constants of 05 §2: duplicate window 10 min, AckWait 30 s, MaxDeliver 10, MaxAckPending 1000
(1 with ``strict_order``). The connection reconnects forever; while it is down ``publish``
returns None, which leaves ``stream_seq`` NULL for the reconciler.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import uuid
from collections.abc import Mapping
from typing import Any

import nats
from nats.aio.client import Client
from nats.js import JetStreamContext
from nats.js.api import DiscardPolicy, PubAck, RetentionPolicy, StorageType, StreamConfig
from nats.js.errors import NotFoundError

log = logging.getLogger(__name__)

DUPLICATE_WINDOW_S = 600
ACK_WAIT_S = 30
MAX_DELIVER = 10
MAX_ACK_PENDING = 1000
MAX_WAITING = 16
MAX_BATCH = 100
MAX_EXPIRES_S = 30
MAX_MSG_SIZE = 1024 * 1024
_NS = 1_000_000_000
AUDIT_STREAM = "SYS_AUDIT"


def stream_name(tenant_id: uuid.UUID) -> str:
    return f"T_{tenant_id.hex}"


def stream_subjects(tenant_id: uuid.UUID) -> str:
    return f"t.{tenant_id.hex}.>"


def inbox_subject(tenant_id: uuid.UUID, workspace_id: uuid.UUID, agent_id: uuid.UUID) -> str:
    return f"t.{tenant_id.hex}.ws.{workspace_id.hex}.agent.{agent_id.hex}.inbox"


def consumer_name(agent_id: uuid.UUID) -> str:
    return f"agt_{agent_id.hex}"


def consumer_config(agent: Mapping[str, Any]) -> dict[str, Any]:
    """The JetStream consumer of an ``agents`` row (05 §2.3), as the JSON API takes it."""
    strict = bool((agent.get("delivery") or {}).get("strict_order"))
    return {
        "durable_name": agent["nats_consumer"],
        "filter_subject": agent["inbox_subject"],
        "ack_policy": "explicit",
        "ack_wait": ACK_WAIT_S * _NS,
        "max_deliver": MAX_DELIVER,
        "max_ack_pending": 1 if strict else MAX_ACK_PENDING,
        "deliver_policy": "all",
        "replay_policy": "instant",
        "max_waiting": MAX_WAITING,
        "max_batch": MAX_BATCH,
        "max_expires": MAX_EXPIRES_S * _NS,
    }


class Broker:
    """One NATS connection per process, connected in the background until it succeeds."""

    def __init__(self, url: str, *, replicas: int = 1, publish_timeout: float = 2.0) -> None:
        self.url, self.replicas, self.publish_timeout = url, replicas, publish_timeout
        self._nc: Client | None = None
        self._js: JetStreamContext | None = None
        self._connecting: asyncio.Task[None] | None = None
        self._streams: set[str] = set()
        self._consumers: dict[str, set[str]] = {}  # stream -> its consumers verified here

    @property
    def connected(self) -> bool:
        return self._nc is not None and self._nc.is_connected

    @property
    def js(self) -> JetStreamContext:
        if self._js is None or not self.connected:
            raise ConnectionError("NATS is not connected")
        return self._js

    async def start(self, wait: float = 0.0) -> None:
        """Connect now, or keep trying in the background; ``wait`` bounds the first attempt."""
        if self._connecting is None:
            self._connecting = asyncio.create_task(self._connect_loop(), name="nats-connect")
        if wait > 0:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(self._connecting), wait)

    async def _connect_loop(self) -> None:
        while self._nc is None:
            try:
                nc = await nats.connect(
                    self.url, max_reconnect_attempts=-1, reconnect_time_wait=1, connect_timeout=2
                )
            except Exception as exc:  # unreachable: try again; sends keep working meanwhile
                log.warning("NATS at %s unreachable: %s", self.url, exc)
                await asyncio.sleep(1.0)
                continue
            self._nc, self._js = nc, nc.jetstream(timeout=self.publish_timeout)

    async def close(self) -> None:
        if self._connecting is not None:
            self._connecting.cancel()
            await asyncio.gather(self._connecting, return_exceptions=True)
        if self._nc is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._nc.drain(), 5.0)
        self._nc = self._js = None
        self._connecting = None  # a later start() connects again

    def knows_stream(self, tenant_id: uuid.UUID) -> bool:
        return stream_name(tenant_id) in self._streams

    def forget(self, tenant_id: uuid.UUID) -> None:
        """Verify the tenant stream and its consumers again before their next use: JetStream
        may have lost them (a NATS server restarted without its data, a stream deleted behind
        the gateway's back), and ``ensure_stream`` then creates the stream again."""
        name = stream_name(tenant_id)
        self._streams.discard(name)
        self._consumers.pop(name, None)

    async def ensure_stream(
        self, tenant_id: uuid.UUID, *, retention_days: int, max_bytes: int | None = None
    ) -> bool:
        """Create the tenant stream if this process has not seen it yet (05 §2.2); whether it
        created it (False when it exists, or when another process created it meanwhile)."""
        name = stream_name(tenant_id)
        if name in self._streams:
            return False
        created = False
        try:
            await self.js.stream_info(name)
        except NotFoundError:
            created = True
            self._consumers.pop(name, None)  # a new stream has none
            await self.js.add_stream(
                StreamConfig(
                    name=name,
                    subjects=[stream_subjects(tenant_id)],
                    retention=RetentionPolicy.LIMITS,
                    storage=StorageType.FILE,
                    num_replicas=self.replicas,
                    max_age=float(retention_days * 86400),
                    max_bytes=max_bytes,
                    discard=DiscardPolicy.NEW,
                    max_msg_size=MAX_MSG_SIZE,
                    duplicate_window=float(DUPLICATE_WINDOW_S),
                    allow_msg_ttl=True,
                    allow_direct=True,
                )
            )
        self._streams.add(name)
        return created

    async def ensure_audit_stream(self) -> None:
        """``SYS_AUDIT`` on ``sys.audit.>`` (data model §2.1): the tenant audit chains as
        events, kept by limits (no age: the chain outlives message retention)."""
        if AUDIT_STREAM in self._streams:
            return
        try:
            await self.js.stream_info(AUDIT_STREAM)
        except NotFoundError:
            await self.js.add_stream(
                StreamConfig(
                    name=AUDIT_STREAM,
                    subjects=["sys.audit.>"],
                    retention=RetentionPolicy.LIMITS,
                    storage=StorageType.FILE,
                    num_replicas=self.replicas,
                    duplicate_window=float(DUPLICATE_WINDOW_S),
                )
            )
        self._streams.add(AUDIT_STREAM)

    async def set_retention(self, tenant_id: uuid.UUID, retention_days: int) -> None:
        """The tenant stream's ``max_age`` (a stream not created yet gets it when it is)."""
        try:
            info = await self.js.stream_info(stream_name(tenant_id))
        except NotFoundError:
            return
        info.config.max_age = float(retention_days * 86400)
        await self.js.update_stream(info.config)

    async def ensure_consumer(self, tenant_id: uuid.UUID, agent: Mapping[str, Any]) -> None:
        """Create (or bring up to date) the agent's durable pull consumer (05 §2.3)."""
        name = str(agent["nats_consumer"])
        stream = stream_name(tenant_id)
        if name in self._consumers.get(stream, ()):
            return
        body = {"stream_name": stream, "config": consumer_config(agent)}
        reply = await self._api(f"$JS.API.CONSUMER.CREATE.{stream}.{name}", body)
        if "error" in reply:
            raise RuntimeError(f"consumer {name}: {reply['error']}")
        self._consumers.setdefault(stream, set()).add(name)

    async def update_consumer(self, tenant_id: uuid.UUID, agent: Mapping[str, Any]) -> None:
        """Bring an existing consumer up to the agent's row (its ``max_ack_pending``)."""
        self._consumers.get(stream_name(tenant_id), set()).discard(str(agent["nats_consumer"]))
        await self.ensure_consumer(tenant_id, agent)

    async def delete_stream(self, tenant_id: uuid.UUID) -> None:
        """The tenant stream with its consumers (gone already is fine)."""
        name = stream_name(tenant_id)
        self.forget(tenant_id)
        with contextlib.suppress(NotFoundError):
            await self.js.delete_stream(name)

    async def delete_consumer(self, tenant_id: uuid.UUID, consumer: str) -> None:
        self._consumers.get(stream_name(tenant_id), set()).discard(consumer)
        with contextlib.suppress(NotFoundError):
            await self.js.delete_consumer(stream_name(tenant_id), consumer)

    async def _api(self, subject: str, body: dict[str, Any]) -> dict[str, Any]:
        if self._nc is None or not self.connected:
            raise ConnectionError("NATS is not connected")
        msg = await self._nc.request(subject, json.dumps(body).encode(), timeout=5)
        reply: dict[str, Any] = json.loads(msg.data)
        return reply

    async def publish(
        self, subject: str, body: bytes, *, msg_id: str, headers: Mapping[str, str] | None = None
    ) -> PubAck | None:
        """Publish with ``Nats-Msg-Id``; the PubAck, or None when NATS did not confirm in time."""
        if not self.connected:
            return None
        try:
            return await self.js.publish(
                subject,
                body,
                timeout=self.publish_timeout,
                headers={"Nats-Msg-Id": msg_id, **(headers or {})},
            )
        except Exception as exc:  # timeout, no responders, stream full: the row waits
            log.warning("publish of %s not confirmed: %s", msg_id, exc)
            return None
