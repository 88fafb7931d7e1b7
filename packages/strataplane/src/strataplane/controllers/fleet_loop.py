"""The fleet controllers' leader loop: per controller shard (schema: controller_shard), one
replica holds the advisory lock and, for every active tenant of the shard, steps its active
rollouts (controllers/rollouts.py), reconciles desired state with the desired-revision rule
and marks silent agents (controllers/not_reporting.py); about once an hour it forgets the class
mode addresses without a GET for 30 days (``class_served``).

Taking a shard sets ``alive_at``, and ``resumed_at`` when no replica ran it for 10 minutes;
the leader refreshes ``alive_at`` about once a minute. A NOTIFY ``release:<tenant>`` wakes the
shard at once instead of at its next interval.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from datetime import datetime
from uuid import UUID

from platformkit.db.scope import Pool, platform_transaction, tenant_transaction
from platformkit.jobs import LeaderLoop, LockKey, shard_keys

from strataplane.agents.settings import FleetSettings
from strataplane.controllers import not_reporting
from strataplane.controllers.fleet_reconcile import Reconciler
from strataplane.controllers.rollouts import step_rollouts
from strataplane.db import SCOPE
from strataplane.store import fleet_class

log = logging.getLogger(__name__)

LOOP_NAME = "strataplane.fleet"
_TICK = 0.2
PRUNE_EVERY = 3600.0  # seconds between two prunings of a tenant's class_served


class FleetControllers:
    def __init__(self, pool: Pool, settings: FleetSettings, shards: int) -> None:
        self.pool, self.settings = pool, settings
        self.reconciler = Reconciler(pool, settings.agent_url)
        # tenants whose release moved, until a pass of their shard (or a full pass) ran
        self._woken: dict[UUID, float] = {}
        self._last_full: dict[int, float] = {}
        self._alive: dict[int, float] = {}
        self._pruned: dict[UUID, float] = {}
        self.loop = LeaderLoop(
            pool, shard_keys(LOOP_NAME, shards), _TICK, self._body, on_gain=self._gain
        )

    async def start(self) -> None:
        await self.loop.start()

    async def stop(self) -> None:
        with contextlib.suppress(Exception):
            await self.loop.stop()

    def wake(self, tenant_id: UUID) -> None:
        self._woken[tenant_id] = time.monotonic()

    async def _gain(self, key: LockKey) -> None:
        async with platform_transaction(self.pool, SCOPE) as conn:
            await conn.execute(
                "INSERT INTO controller_shard (shard, alive_at, resumed_at) VALUES (%s, now(), "
                "now()) ON CONFLICT (shard) DO UPDATE SET alive_at = now(), resumed_at = CASE "
                "WHEN controller_shard.alive_at < now() - interval '10 minutes' THEN now() "
                "ELSE controller_shard.resumed_at END",
                (key[1],),
            )
        self._alive[key[1]] = time.monotonic()

    async def _body(self, key: LockKey) -> None:
        shard = key[1]
        now = time.monotonic()
        interval = self.settings.controller_interval
        full = now - self._last_full.get(shard, 0.0) >= interval
        # a tenant of another replica's shard is not reconciled here: forget it after a while
        self._woken = {t: at for t, at in self._woken.items() if now - at < interval}
        if not full and not self._woken:
            return  # nothing to do before the next full pass: no query every tick
        async with platform_transaction(self.pool, SCOPE) as conn:
            if now - self._alive.get(shard, 0.0) >= 60:
                await conn.execute(
                    "UPDATE controller_shard SET alive_at = now() WHERE shard = %s", (shard,)
                )
                self._alive[shard] = now
            cur = await conn.execute(
                "SELECT t.id, s.resumed_at FROM tenant t JOIN controller_shard s "
                "ON s.shard = t.shard WHERE t.shard = %s AND t.state = 'active'",
                (shard,),
            )
            tenants = [(r["id"], r["resumed_at"]) for r in await cur.fetchall()]
        for tenant_id, resumed_at in tenants:
            if not full and tenant_id not in self._woken:
                continue
            self._woken.pop(tenant_id, None)
            try:
                await self._tenant(tenant_id, resumed_at, full=full)
            except Exception:  # one tenant's failure never holds up the rest of the shard
                log.exception("fleet controllers: tenant %s failed; retried next pass", tenant_id)
        if full:
            self._last_full[shard] = now
        await asyncio.sleep(0)

    async def _tenant(self, tenant_id: UUID, resumed_at: datetime, *, full: bool) -> None:
        await step_rollouts(self.pool, tenant_id, self.settings.agent_url)
        await self.reconciler.reconcile(tenant_id)
        if full:
            now = time.monotonic()
            prune = now - self._pruned.get(tenant_id, -PRUNE_EVERY) >= PRUNE_EVERY
            async with tenant_transaction(self.pool, SCOPE, tenant_id) as conn:
                held_ms = round(self.settings.elastic_poll * 1000)
                await not_reporting.run(conn, tenant_id, resumed_at, held_ms)
                if prune:
                    await fleet_class.prune_served(conn, tenant_id)
            if prune:
                self._pruned[tenant_id] = now
