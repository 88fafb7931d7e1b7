"""``reconcile.unpublished`` (05-DELIVERY-SEMANTICS §12.1): publish accepted rows whose
``stream_seq`` is still NULL, e.g. after a gateway died between commit and publish.

Find, per tenant of this shard (the tenant list comes from ``platform_tenants()``; every
message query runs in that tenant's scope under RLS): rows older than ``min_age``, oldest
first, 500 at most. Act per row: re-read, skip unless still ``accepted`` without a sequence,
publish with the same ``Nats-Msg-Id`` (JetStream dedupes a copy that did get stored: the PubAck
then says ``duplicate`` and carries the original sequence), write the sequence. Rows older than
a minute are retried once a minute; after 24 h a row is dead-lettered (``publish_exhausted``).
No receipt is issued here. One leader per shard runs it (``reconciler_loop``).
"""

from __future__ import annotations

import logging
import time
import uuid
from datetime import UTC, datetime, timedelta

from platformkit.db.scope import tenant_transaction, transaction
from platformkit.jobs import LeaderLoop, LockKey, shard_keys

from agentbus.db import SCOPE
from agentbus.gateway.actions.publish import publish_message
from agentbus.gateway.context import Gateway
from agentbus.gateway.store import messages

log = logging.getLogger(__name__)

LOOP_NAME = "agentbus.reconcile.unpublished"
BATCH = 500
SLOW_AFTER = timedelta(minutes=1)
SLOW_EVERY_S = 60.0
GIVE_UP_AFTER = timedelta(hours=24)


class Reconciler:
    def __init__(self, gw: Gateway, *, min_age: timedelta, shards: int = 1) -> None:
        self.gw, self.min_age, self.shards = gw, min_age, shards
        self._last_try: dict[uuid.UUID, float] = {}

    async def tenants(self, shard: int) -> list[uuid.UUID]:
        async with transaction(self.gw.pool) as conn:
            rows = await (
                await conn.execute(
                    "SELECT id FROM platform_tenants() WHERE status IN ('active', 'suspended')"
                )
            ).fetchall()
        return [r["id"] for r in rows if r["id"].int % self.shards == shard]

    async def run_once(self, shard: int = 0) -> int:
        """One pass over the shard; how many rows got a sequence."""
        published = 0
        for tenant_id in await self.tenants(shard):
            async with tenant_transaction(self.gw.pool, SCOPE, tenant_id) as conn:
                rows = await messages.unpublished(
                    conn, tenant_id, older_than=self.min_age, limit=BATCH
                )
            for row in rows:
                published += await self.act(tenant_id, row["id"])
        return published

    async def act(self, tenant_id: uuid.UUID, msg_id: uuid.UUID) -> int:
        now, mono = datetime.now(UTC), time.monotonic()
        async with tenant_transaction(self.gw.pool, SCOPE, tenant_id) as conn:
            row = await messages.find_message(conn, tenant_id, msg_id)
            if row is None or row["status"] != "accepted" or row["stream_seq"] is not None:
                self._last_try.pop(msg_id, None)
                return 0
            if row["accepted_at"] < now - GIVE_UP_AFTER:
                await messages.dead_letter_unpublished(conn, tenant_id, row, "publish_exhausted")
                log.warning("gave up publishing %s after 24 h", msg_id)
                return 0
        slow = row["accepted_at"] < now - SLOW_AFTER
        if slow and mono - self._last_try.get(msg_id, 0.0) < SLOW_EVERY_S:
            return 0
        self._last_try[msg_id] = mono
        seq = await publish_message(self.gw, row)
        if seq is None:
            return 0
        self._last_try.pop(msg_id, None)
        log.info("reconciler published %s as %s", msg_id, seq)
        return 1


def reconciler_loop(gw: Gateway) -> LeaderLoop:
    settings = gw.settings
    reconciler = Reconciler(
        gw,
        min_age=timedelta(seconds=settings.reconcile_min_age_s),
        shards=settings.reconcile_shards,
    )

    async def body(key: LockKey) -> None:
        await reconciler.run_once(key[1])

    keys = shard_keys(LOOP_NAME, settings.reconcile_shards)
    return LeaderLoop(gw.pool, keys, settings.reconcile_interval_s, body)
