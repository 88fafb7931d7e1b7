"""Reconcile desired state with the release pointer: find the agents whose desired revision is
not the pointer (in id order, in batches), render and write them, one transaction per batch,
so agents get their new artifact progressively: each batch's transaction also tells the
replicas (NOTIFY ``agents:``), so the next poll of any of its agents sees the new
Last-Modified. Agents whose render failed are retried when
the pointer moves again, not on every pass."""

from __future__ import annotations

import time
from uuid import UUID

from platformkit.db.scope import Pool, tenant_transaction

from strataplane.actions.fleet_desired import render_and_write
from strataplane.db import SCOPE
from strataplane.store import fleet_notify, fleet_spec
from strataplane.store.fleet_desired import render_inputs

BATCH = 2000
KINDS = ("telegraf",)


class Reconciler:
    def __init__(self, pool: Pool, agent_url: str) -> None:
        self.pool, self.agent_url = pool, agent_url
        self._done: dict[tuple[UUID, str], int] = {}  # the pointer last fully reconciled
        self.last_seconds: float | None = None

    async def reconcile(self, tenant_id: UUID) -> int:
        changed = 0
        for kind in KINDS:
            changed += await self._kind(tenant_id, kind)
        return changed

    async def _kind(self, tenant_id: UUID, kind: str) -> int:
        started = time.perf_counter()
        async with tenant_transaction(self.pool, SCOPE, tenant_id) as conn:
            revision = await fleet_spec.release_revision(conn, tenant_id, kind)
        if revision is None:
            return 0
        retried = self._done.get((tenant_id, kind)) != revision
        after: UUID | None = None
        changed = 0
        while True:
            async with tenant_transaction(self.pool, SCOPE, tenant_id) as conn:
                batch = await render_inputs(
                    conn,
                    tenant_id,
                    kind=kind,
                    stale_for=revision,
                    skip_failed=not retried,
                    after=after,
                    limit=BATCH,
                )
                if not batch:
                    break
                written = await render_and_write(
                    conn, tenant_id, batch, revision, self.agent_url, notify=False
                )
                if written:  # delivered with the batch's commit: replicas reload it in bulk
                    await fleet_notify.agents_changed(conn, tenant_id, batch[0].id, batch[-1].id)
            changed += written
            after = batch[-1].id
        self._done[(tenant_id, kind)] = revision
        if changed:
            self.last_seconds = time.perf_counter() - started
        return changed
