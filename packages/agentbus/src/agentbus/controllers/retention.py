"""Jobs ``retention.messages`` and ``retention.blobs`` (hourly) and ``partitions.drop`` (daily),
data model §1.11 and §8.

``retention.messages``: per tenant, in its scope, the messages accepted more than
``retention_days`` ago are deleted oldest first, 10,000 at a time, with their ``delivery_state``
and ``receipts`` rows and their payload objects. The objects are deleted inside the batch's
transaction, before its commit: when the object store fails, the batch rolls back and the next
run tries again, so no object outlives the row that names it for long and no row points at an
object deleted by mistake. (A commit that fails after the objects went leaves rows already past
retention without their payloads, which the next run deletes.) Tasks, conversations and the
audit log are kept: their retention is not the messages'. The NATS copies expire by the
stream's ``max_age``, which is the same retention.

``retention.blobs``, in the same pass per tenant: blobs past ``expires_at``, objects before the
commit as above. A reference from a message keeps its blob at least as long as the message
(``gateway/actions/blobs.py``), so no message within its retention names a blob deleted here.

A tenant being deleted (``deleting``, data model §5.5 step 4; its keys are destroyed already, so
nothing of this is readable) loses every message and every blob in the same way at the next run,
then becomes ``deleted``, with a ``tenant.deleted`` audit row. Its other rows (agents, tasks,
conversations, users, tokens, the audit log) stay.

``partitions.drop``: the database function ``drop_message_partitions()`` (migration 0012)
detaches and drops the monthly partitions wholly older than the longest tenant retention, once
retention.messages has emptied them.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass
from typing import Any

from platformkit.db.scope import Pool, tenant_transaction, transaction
from platformkit.jobs import LeaderLoop, LockKey, shard_keys

from agentbus.actions.audit import record_action
from agentbus.actions.context import Actor, Ctx
from agentbus.db import SCOPE
from agentbus.gateway.store import blobs
from agentbus.gateway.store.objectstore import ObjectStore
from agentbus.ids import format_id
from agentbus.store.tenants import set_tenant_status

log = logging.getLogger(__name__)
Row = dict[str, Any]

MESSAGES_LOOP = "agentbus.retention.messages"
DROP_LOOP = "agentbus.partitions.drop"
HOURLY, DAILY = 3600.0, 24 * 3600.0
BATCH = 10_000
EVERYTHING = -1
"""A retention that takes every message: ``accepted_at`` before tomorrow."""

# The tenant's oldest rows through the primary key (tenant_id, accepted_at, id); the deletes of
# the other tables reach them through their msg_id indexes.
_EXPIRE = """
WITH doomed AS (
    SELECT tenant_id, accepted_at, id FROM messages
     WHERE tenant_id = %(t)s AND accepted_at < now() - make_interval(days => %(days)s)
     ORDER BY accepted_at LIMIT %(batch)s),
gone AS (
    DELETE FROM messages m USING doomed d
     WHERE m.tenant_id = d.tenant_id AND m.accepted_at = d.accepted_at AND m.id = d.id
    RETURNING m.id, m.payload_ref),
states AS (DELETE FROM delivery_state s USING gone WHERE s.msg_id = gone.id),
signed AS (DELETE FROM receipts r USING gone WHERE r.msg_id = gone.id),
history AS (DELETE FROM events e USING gone WHERE e.tenant_id = %(t)s AND e.message_id = gone.id)
SELECT id, payload_ref FROM gone"""


@dataclass
class Retention:
    pool: Pool
    objects: ObjectStore
    batch: int = BATCH
    shards: int = 1

    async def tenants(self, shard: int) -> list[Row]:
        async with transaction(self.pool) as conn:
            cur = await conn.execute(
                "SELECT id, retention_days, status::text AS status FROM platform_tenants()"
                " WHERE status <> 'deleted'"
            )
            rows = await cur.fetchall()
        return [r for r in rows if r["id"].int % self.shards == shard]

    async def expire_batch(self, tenant_id: uuid.UUID, retention_days: int) -> int:
        """One batch of one tenant; how many messages it deleted."""
        async with tenant_transaction(self.pool, SCOPE, tenant_id) as conn:
            cur = await conn.execute(
                _EXPIRE, {"t": tenant_id, "days": retention_days, "batch": self.batch}
            )
            gone = await cur.fetchall()
            await self.objects.delete_many([row["payload_ref"] for row in gone])
        return len(gone)

    async def expire_blobs_batch(self, tenant_id: uuid.UUID, *, every: bool = False) -> int:
        """One batch of the tenant's blobs past ``expires_at`` (``every`` one, for a tenant
        being deleted), objects first; how many."""
        async with tenant_transaction(self.pool, SCOPE, tenant_id) as conn:
            delete = blobs.delete_any if every else blobs.delete_expired
            keys = await delete(conn, tenant_id, self.batch)
            await self.objects.delete_many(keys)
        return len(keys)

    async def expire_tenant(self, tenant_id: uuid.UUID, retention_days: int) -> int:
        """Messages past retention, then blobs past ``expires_at``; how many messages. A
        retention of ``EVERYTHING`` takes every message and every blob."""
        deleted = 0
        while True:
            count = await self.expire_batch(tenant_id, retention_days)
            deleted += count
            if count < self.batch:
                break
        every = retention_days == EVERYTHING
        while await self.expire_blobs_batch(tenant_id, every=every) == self.batch:
            pass
        return deleted

    async def finish_deletion(self, tenant_id: uuid.UUID, messages: int) -> None:
        """``deleting`` -> ``deleted`` once its messages and blobs are gone."""
        ctx = Ctx(self.pool, Actor.system("retention"))
        async with tenant_transaction(self.pool, SCOPE, tenant_id) as conn:
            if await set_tenant_status(conn, tenant_id, "deleted", only_from=["deleting"]):
                await record_action(
                    conn, ctx, tenant_id, "tenant.deleted", target_type="tenant",
                    target_id=format_id("ten", tenant_id), details={"messages": messages},
                )  # fmt: skip

    async def run_once(self, shard: int = 0) -> int:
        """Every tenant of the shard; how many messages were deleted in all. A tenant that
        fails (its object store down, say) is logged and left for the next run."""
        deleted = 0
        for tenant in await self.tenants(shard):
            shredded = tenant["status"] == "deleting"
            days = EVERYTHING if shredded else tenant["retention_days"]
            try:
                count = await self.expire_tenant(tenant["id"], days)
                if shredded:
                    await self.finish_deletion(tenant["id"], count)
            except Exception:
                log.exception("retention of tenant %s failed; trying again next run", tenant["id"])
                continue
            if count:
                log.info("deleted %d messages of tenant %s past retention", count, tenant["id"])
            deleted += count
        return deleted


async def drop_partitions(pool: Pool) -> list[Row]:
    """``(partition_name, dropped)`` of every partition wholly past the longest retention."""
    async with transaction(pool) as conn:
        cur = await conn.execute("SELECT partition_name, dropped FROM drop_message_partitions()")
        rows = await cur.fetchall()
    for row in rows:
        if not row["dropped"]:
            log.warning("%s is past retention but still holds rows; kept", row["partition_name"])
    return rows


def retention_loops(pool: Pool, objects: ObjectStore) -> list[LeaderLoop]:
    """Leader loops for both jobs, each on one replica, at start and then on schedule."""
    retention = Retention(pool, objects)

    async def expire(key: LockKey) -> None:
        await retention.run_once(key[1])

    async def drop(_key: LockKey) -> None:
        dropped = [r["partition_name"] for r in await drop_partitions(pool) if r["dropped"]]
        if dropped:
            log.info("dropped messages partitions %s", ", ".join(dropped))

    return [
        LeaderLoop(pool, shard_keys(MESSAGES_LOOP, 1), HOURLY, expire),
        LeaderLoop(pool, shard_keys(DROP_LOOP, 1), DAILY, drop),
    ]
