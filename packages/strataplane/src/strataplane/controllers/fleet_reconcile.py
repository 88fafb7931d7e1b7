"""Reconcile desired state with the desired-revision rule (``actions/fleet_rule``): find the
agents whose desired revision is not the one the rule gives them (in id order, in batches),
render and write them, one transaction per batch, so agents get their new artifact
progressively: each batch's transaction also tells the replicas (NOTIFY ``agents:``), so the
next poll of any of its agents sees the new Last-Modified. Without pins or rollout assignments
the candidates are found in SQL (desired revision not the pointer); otherwise every agent of
the kind is read and the rule decides. A pass whose rule has the signature of the last
complete pass is skipped; agents whose render failed are retried when the signature changes,
not on every pass.

The agent URL is a render input outside the revision (it is in every heartbeat and secret
store URL). A tenant whose artifacts were rendered with another URL than this server's
(``fleet_render_url``: a restart with a new ``--port``, ``--host`` or
STRATAPLANE_FLEET_AGENT_URL) has every agent re-rendered at its desired revision once, without a
merge; agents see a new Last-Modified and reload."""

from __future__ import annotations

import time
from uuid import UUID

from platformkit.db.scope import Pool, tenant_transaction

from strataplane.actions.fleet_desired import write_by_rule
from strataplane.actions.fleet_rule import load_rule
from strataplane.db import SCOPE
from strataplane.render.cache import RENDERED_KINDS
from strataplane.store import fleet_notify
from strataplane.store.fleet_desired import render_inputs, rendered_url, set_rendered_url

BATCH = 2000
KINDS = RENDERED_KINDS


class Reconciler:
    def __init__(self, pool: Pool, agent_url: str) -> None:
        self.pool, self.agent_url = pool, agent_url
        self._done: dict[tuple[UUID, str], tuple[object, ...]] = {}  # last complete signature
        self._url_current: set[UUID] = set()  # tenants rendered with self.agent_url
        self.last_seconds: float | None = None

    async def reconcile(self, tenant_id: UUID) -> int:
        everyone = False
        if tenant_id not in self._url_current:
            async with tenant_transaction(self.pool, SCOPE, tenant_id) as conn:
                everyone = await rendered_url(conn, tenant_id) != self.agent_url
        changed = 0
        for kind in KINDS:
            changed += await self._kind(tenant_id, kind, everyone=everyone)
        if everyone:
            async with tenant_transaction(self.pool, SCOPE, tenant_id) as conn:
                await set_rendered_url(conn, tenant_id, self.agent_url)
        self._url_current.add(tenant_id)
        return changed

    async def _kind(self, tenant_id: UUID, kind: str, *, everyone: bool = False) -> int:
        started = time.perf_counter()
        async with tenant_transaction(self.pool, SCOPE, tenant_id) as conn:
            rule = await load_rule(conn, tenant_id, kind)
        if rule is None:
            return 0
        retried = everyone or self._done.get((tenant_id, kind)) != rule.signature
        after: UUID | None = None
        changed = 0
        while True:
            async with tenant_transaction(self.pool, SCOPE, tenant_id) as conn:
                batch = await render_inputs(
                    conn,
                    tenant_id,
                    kind=kind,
                    stale_for=rule.pointer if rule.simple and not everyone else None,
                    skip_failed=not retried,
                    after=after,
                    limit=BATCH,
                )
                if not batch:
                    break
                stale = [
                    a
                    for a in batch
                    if everyone
                    or a.desired_revision_id != rule.revision_for(a)
                    or (retried and a.sync == "render_error")
                ]
                written = await write_by_rule(
                    conn, tenant_id, stale, rule, self.agent_url, notify=False
                )
                if written:  # delivered with the batch's commit: replicas reload it in bulk
                    await fleet_notify.agents_changed(conn, tenant_id, batch[0].id, batch[-1].id)
            changed += written
            after = batch[-1].id
        self._done[(tenant_id, kind)] = rule.signature
        if changed:
            self.last_seconds = time.perf_counter() - started
        return changed
