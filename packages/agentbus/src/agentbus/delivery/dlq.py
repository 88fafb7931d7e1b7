"""``dlq.advisories`` (05-DELIVERY-SEMANTICS.md §7.1): dead letters from MaxDeliver advisories.

JetStream publishes ``$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.<stream>.<consumer>`` when a
message used up its deliveries; core NATS would drop it if nobody listened, so the platform
stream ``AB_ADVISORIES`` captures those subjects (file storage, 7 days) and every gateway reads
them through the shared durable pull consumer ``dlq-worker``. Per advisory: the stream name
gives the tenant (``T_<hex>``), the consumer the agent (``agt_<hex>``); a direct get of the
sequence gives ``Nats-Msg-Id``; then, in the tenant's scope, ``accepted | fetched ->
dead_lettered`` with ``dlq_reason = 'max_deliveries'`` (a task request fails its task). The
advisory is acked once PostgreSQL has the fact, so a crash only repeats an idempotent step.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
import uuid
from typing import Any

from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.errors import NoRespondersError
from nats.js.errors import NotFoundError
from platformkit.db.scope import Pool, tenant_transaction

from agentbus.broker import Broker
from agentbus.db import SCOPE
from agentbus.delivery import jetstream, notices, outcomes, store
from agentbus.delivery.domain import MAX_DELIVERIES
from agentbus.delivery.notices import Notes
from agentbus.delivery.service import nats_client
from agentbus.ids import InvalidId, parse_id

log = logging.getLogger(__name__)

STREAM = "AB_ADVISORIES"
SUBJECTS = "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.>"
CONSUMER = "dlq-worker"
RETENTION_S = 7 * 86400
_NS = 1_000_000_000
_STREAM_NAME = re.compile(r"T_([0-9a-f]{32})")
_CONSUMER_NAME = re.compile(r"agt_([0-9a-f]{32})")
RETRY_MS = 5000


async def _api(nc: Client, subject: str, body: dict[str, Any]) -> dict[str, Any]:
    reply: dict[str, Any] = json.loads(
        (await nc.request(subject, json.dumps(body).encode(), timeout=5)).data
    )
    return reply


async def ensure_advisory_stream(broker: Broker) -> None:
    """The capture stream and the worker's consumer; both calls are idempotent."""
    nc = nats_client(broker)
    stream = {
        "name": STREAM, "subjects": [SUBJECTS], "retention": "limits", "storage": "file",
        "num_replicas": broker.replicas, "max_age": RETENTION_S * _NS, "discard": "old",
    }  # fmt: skip
    reply = await _api(nc, f"$JS.API.STREAM.CREATE.{STREAM}", stream)
    if "error" in reply and reply["error"].get("err_code") != 10058:  # 10058: exists
        raise RuntimeError(f"stream {STREAM}: {reply['error']}")
    consumer = {
        "stream_name": STREAM,
        "config": {"durable_name": CONSUMER, "ack_policy": "explicit", "ack_wait": 30 * _NS,
                   "deliver_policy": "all", "max_ack_pending": 1000},
    }  # fmt: skip
    reply = await _api(nc, f"$JS.API.CONSUMER.CREATE.{STREAM}.{CONSUMER}", consumer)
    if "error" in reply:
        raise RuntimeError(f"consumer {CONSUMER}: {reply['error']}")


def parse_advisory(data: bytes) -> tuple[uuid.UUID, uuid.UUID, int] | None:
    """(tenant id, agent id, stream sequence) of a MAX_DELIVERIES advisory, or None."""
    try:
        doc: dict[str, Any] = json.loads(data)
        stream = _STREAM_NAME.fullmatch(str(doc["stream"]))
        consumer = _CONSUMER_NAME.fullmatch(str(doc["consumer"]))
        seq = int(doc["stream_seq"])
    except (ValueError, KeyError, TypeError):
        return None
    if stream is None or consumer is None:
        return None
    return uuid.UUID(hex=stream.group(1)), uuid.UUID(hex=consumer.group(1)), seq


class DeadLetterWorker:
    def __init__(self, pool: Pool, broker: Broker, *, wait_s: float = 5.0) -> None:
        self.pool, self.broker, self.wait_s = pool, broker, wait_s
        self._task: asyncio.Task[None] | None = None
        self._stop = asyncio.Event()

    async def handle(self, data: bytes) -> bool:
        """Apply one advisory; True once the fact is in PostgreSQL (or there is nothing to do)."""
        parsed = parse_advisory(data)
        if parsed is None:
            log.warning("ignoring a malformed MAX_DELIVERIES advisory")
            return True
        tenant_id, agent_id, seq = parsed
        try:
            stored = await self.broker.js.get_msg(f"T_{tenant_id.hex}", seq, direct=True)
            msg_id = parse_id("msg", (stored.headers or {}).get("Nats-Msg-Id", "").split(":")[0])
        except (NotFoundError, NoRespondersError, InvalidId):
            return True  # copy or stream gone (retention, expiry, tenant): nothing to dead-letter
        notes: Notes = []
        async with tenant_transaction(self.pool, SCOPE, tenant_id) as conn:
            row = await store.lock(conn, tenant_id, agent_id, msg_id)
            if row is not None and row["status"] in ("accepted", "fetched"):
                await outcomes.dead_letter(conn, tenant_id, row, MAX_DELIVERIES, notes)
        await notices.publish(self.broker, notes)
        return True

    async def run_once(self) -> int:
        """Pull and handle one batch of advisories; how many were handled."""
        nc = nats_client(self.broker)
        batch = await jetstream.pull(nc, STREAM, CONSUMER, batch=100, max_bytes=1 << 20,
                                     wait_s=self.wait_s, stop=self._stop)  # fmt: skip
        for msg in batch:
            await self._one(msg)
        return len(batch)

    async def _one(self, msg: Msg) -> None:
        reply = msg.reply or ""
        try:
            await self.handle(msg.data)
        except Exception:
            log.exception("dead-lettering from an advisory failed; retrying later")
            await jetstream.settle_quietly(nats_client(self.broker), reply, "nak", RETRY_MS)
            return
        await jetstream.ack(nats_client(self.broker), reply)

    async def _run(self) -> None:
        ready = False
        while not self._stop.is_set():
            try:
                if not ready:
                    await ensure_advisory_stream(self.broker)
                    ready = True
                await self.run_once()
            except Exception as exc:  # NATS away or PostgreSQL down: wait, re-verify, go on
                ready = False
                log.warning("dlq worker: %s", exc)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._stop.wait(), 2.0)

    async def start(self) -> None:
        if self._task is None:
            self._stop.clear()
            self._task = asyncio.create_task(self._run(), name="dlq-worker")

    async def stop(self) -> None:
        self._stop.set()
        if self._task is not None:
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
