"""``tasks.expire`` (data model §1.11, 05 §12): open tasks past their deadline become
``expired`` with ``error_code = 'AB-6010'``. Find per tenant of the shard, act per task under
its row lock (a task answered meanwhile is left alone); one leader per shard, every minute.
"""

from __future__ import annotations

import logging
import uuid

from platformkit.db.scope import Pool, tenant_transaction
from platformkit.jobs import LeaderLoop, LockKey, shard_keys

from agentbus.db import SCOPE
from agentbus.delivery.sweeper import shard_tenants
from agentbus.tasks import actions, store
from agentbus.tasks.domain import Event, State

log = logging.getLogger(__name__)

LOOP_NAME = "agentbus.tasks.expire"
BATCH = 500
EVERY_S = 60.0


async def expire_once(pool: Pool, shard: int = 0, shards: int = 1) -> int:
    """One pass; how many tasks it expired."""
    expired = 0
    for tenant_id in await shard_tenants(pool, shard, shards):
        async with tenant_transaction(pool, SCOPE, tenant_id) as conn:
            due = await store.due_expiries(conn, tenant_id, BATCH)
        for task_id in due:
            expired += await _expire(pool, tenant_id, task_id)
    return expired


async def _expire(pool: Pool, tenant_id: uuid.UUID, task_id: uuid.UUID) -> int:
    async with tenant_transaction(pool, SCOPE, tenant_id) as conn:
        task = await actions.system_event(
            conn, tenant_id, task_id, Event.EXPIRE, reason="deadline passed"
        )
    return int(task is not None and task["state"] == State.EXPIRED)


def tasks_expire_loop(pool: Pool, *, shards: int = 1, interval: float = EVERY_S) -> LeaderLoop:
    async def body(key: LockKey) -> None:
        await expire_once(pool, key[1], shards)

    return LeaderLoop(pool, shard_keys(LOOP_NAME, shards), interval, body)
