"""Per-process caches of the config endpoints: each agent's serving state and the bytes of
artifacts, kept until a NOTIFY says the row changed (or ``ttl`` passes). Concurrent misses
share one query (agents/coalesce.py)."""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import replace
from typing import Any
from uuid import UUID

from platformkit.db.scope import Pool, tenant_transaction

from strataplane.agents.auth import AgentIdentity
from strataplane.agents.coalesce import Coalescer
from strataplane.db import SCOPE
from strataplane.render.artifacts import deliverable
from strataplane.store import fleet_artifacts, fleet_serving
from strataplane.store.fleet_serving import ServingState


class StateCache:
    def __init__(self, pool: Pool, ttl: float) -> None:
        self._pool = pool
        self._ttl = ttl
        self._entries: dict[UUID, tuple[float, ServingState]] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._generation: dict[UUID, int] = {}
        self._warmed: set[UUID] = set()
        self._epoch = 0  # bumped by every invalidation
        self._served: dict[UUID, bytes] = {}  # deliveries noticed, until the rows show them
        self._loader = Coalescer[AgentIdentity, ServingState](self._fetch)

    async def get(self, who: AgentIdentity) -> ServingState | None:
        entry = self._entries.get(who.agent_id)
        now = time.monotonic()
        if entry is not None and entry[0] > now and entry[1].tenant_id == who.tenant_id:
            return entry[1]
        return await self.load(who)

    async def load(self, who: AgentIdentity) -> ServingState | None:
        if who.tenant_id not in self._warmed:  # the first miss of a tenant loads all of it
            self._warmed.add(who.tenant_id)
            self._spawn(self._warm(who.tenant_id))
        return await self._loader.load(who)

    async def _fetch(self, agents: Sequence[AgentIdentity]) -> dict[AgentIdentity, ServingState]:
        """The states of agents that missed, one query per tenant."""
        epoch = self._epoch
        by_tenant: dict[UUID, list[UUID]] = {}
        for who in agents:
            by_tenant.setdefault(who.tenant_id, []).append(who.agent_id)
        found: dict[AgentIdentity, ServingState] = {}
        for tenant_id, ids in by_tenant.items():
            async with tenant_transaction(self._pool, SCOPE, tenant_id) as conn:
                states = await fleet_serving.serving_states(conn, tenant_id, ids)
            for state in states:
                found[AgentIdentity(tenant_id, state.agent_id)] = state
        for who in agents:
            known = found.get(who)
            if known is None:
                self._entries.pop(who.agent_id, None)
            elif epoch == self._epoch:  # else a notice came during the read: do not keep it
                self.put(known)
        return found

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _warm(self, tenant_id: UUID) -> None:
        generation = self._generation.get(tenant_id, 0)
        after: UUID | None = None
        while True:
            async with tenant_transaction(self._pool, SCOPE, tenant_id) as conn:
                found = await fleet_serving.tenant_states(conn, tenant_id, after=after, limit=5000)
            if not found or self._generation.get(tenant_id, 0) != generation:
                return
            for state in found:
                if state.agent_id not in self._entries:
                    self.put(state)
            after = found[-1].agent_id

    def put(self, state: ServingState) -> None:
        """Cache ``state`` read from the database; a delivery noticed while it was read wins
        over the read (a load can begin before the served row is written and end after its
        notice)."""
        noticed = self._served.get(state.agent_id)
        if noticed is not None:
            if noticed == state.served_artifact:
                del self._served[state.agent_id]  # the row caught up
            else:
                state = replace(state, served_artifact=noticed)
        self._entries[state.agent_id] = (time.monotonic() + self._ttl, state)

    def mark_served(self, tenant_id: UUID, agent_id: UUID, artifact: bytes) -> None:
        entry = self._entries.get(agent_id)
        if entry is not None and entry[1].tenant_id == tenant_id:
            self._entries[agent_id] = (entry[0], replace(entry[1], served_artifact=artifact))
        if len(self._served) > 100_000:
            self._served.clear()
        self._served[agent_id] = artifact  # until a read shows the row caught up

    def served_here(self, agent_id: UUID, artifact: bytes) -> None:
        """This replica delivered ``artifact``: update the cached entry if it still desires
        that artifact (a request's snapshot may predate a newer desired one)."""
        self._served.pop(agent_id, None)
        entry = self._entries.get(agent_id)
        if entry is not None and entry[1].desired_artifact == artifact:
            self._entries[agent_id] = (entry[0], replace(entry[1], served_artifact=artifact))

    def invalidate_agent(self, tenant_id: UUID, agent_id: UUID) -> None:
        self._epoch += 1
        self._generation[tenant_id] = self._generation.get(tenant_id, 0) + 1
        self._entries.pop(agent_id, None)

    def invalidate_tenant(self, tenant_id: UUID) -> None:
        """Drop the tenant's entries and reload them in bulk in the background, so that a
        merge does not turn the next poll of every agent into a database round trip."""
        self._drop(tenant_id, lambda _agent_id: True)

    def invalidate_range(self, tenant_id: UUID, first: UUID, last: UUID) -> None:
        """The same for the agents with ids from ``first`` to ``last``."""
        self._drop(tenant_id, lambda agent_id: first <= agent_id <= last)

    def _drop(self, tenant_id: UUID, chosen: Callable[[UUID], bool]) -> None:
        self._epoch += 1
        self._generation[tenant_id] = self._generation.get(tenant_id, 0) + 1
        mine = [a for a, (_t, s) in self._entries.items() if s.tenant_id == tenant_id and chosen(a)]
        for agent_id in mine:
            del self._entries[agent_id]
        if mine:
            self._spawn(self._reload(tenant_id, mine))

    async def _reload(self, tenant_id: UUID, agent_ids: list[UUID]) -> None:
        generation = self._generation[tenant_id]
        for start in range(0, len(agent_ids), 5000):
            async with tenant_transaction(self._pool, SCOPE, tenant_id) as conn:
                found = await fleet_serving.serving_states(
                    conn, tenant_id, agent_ids[start : start + 5000]
                )
            if self._generation.get(tenant_id) != generation:
                return  # invalidated again meanwhile: what was read may be stale, misses load
            for state in found:
                if state.agent_id not in self._entries:
                    self.put(state)

    def clear(self) -> None:
        self._epoch += 1
        self._entries.clear()
        self._warmed.clear()


class ArtifactBytes:
    """Deliverable bytes by (tenant, hash), LRU; artifacts never change, so no invalidation."""

    def __init__(self, pool: Pool, max_entries: int = 4096) -> None:
        self._pool = pool
        self._entries: OrderedDict[tuple[UUID, bytes], bytes] = OrderedDict()
        self._max = max_entries
        self._loader = Coalescer[tuple[UUID, bytes], bytes](self._fetch)

    async def get(self, tenant_id: UUID, digest: bytes) -> bytes | None:
        key = (tenant_id, digest)
        found = self._entries.get(key)
        if found is not None:
            self._entries.move_to_end(key)
            return found
        return await self._loader.load(key)

    async def _fetch(self, keys: Sequence[tuple[UUID, bytes]]) -> dict[tuple[UUID, bytes], bytes]:
        by_tenant: dict[UUID, list[bytes]] = {}
        for tenant_id, digest in keys:
            by_tenant.setdefault(tenant_id, []).append(digest)
        found: dict[tuple[UUID, bytes], bytes] = {}
        for tenant_id, digests in by_tenant.items():
            async with tenant_transaction(self._pool, SCOPE, tenant_id) as conn:
                arts = await fleet_artifacts.get_artifacts(conn, tenant_id, digests)
            for digest, art in arts.items():
                found[(tenant_id, digest)] = deliverable(art.content, art.hash)
        self._entries.update(found)
        while len(self._entries) > self._max:
            self._entries.popitem(last=False)
        return found
