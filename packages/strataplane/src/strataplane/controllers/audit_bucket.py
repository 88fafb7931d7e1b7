"""Ship the tenants' audit chains to an object store (S3 and what obstore reaches), at least
once and in order: per tenant, the events after what the bucket already holds
(``domain/audit_bucket``) go up in batches of JSON Lines, one object per batch, in seq order.

No state is kept outside the bucket, so a restart, another machine or a crash between two
objects goes on where the bucket says; a batch that went up just before a crash may go up once
more under the same name (same content). A failed upload ends the tenant's pass: nothing later
goes up before it, and the next pass tries again. The backlog is the tenant's latest seq less
what the bucket holds. One shipper per bucket: two at once write the same objects twice."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from uuid import UUID

import obstore
from platformkit.db.scope import Pool, platform_transaction, tenant_transaction

from strataplane.controllers.audit_sinks import export_events
from strataplane.db import SCOPE
from strataplane.domain.audit_bucket import exported_through, object_key, tenant_folder
from strataplane.store import audit_sinks

if TYPE_CHECKING:
    from obstore.store import ObjectStore

__all__ = ["BucketShipper", "TenantShipped"]


@dataclass(frozen=True)
class TenantShipped:
    tenant_id: UUID
    shipped: int  # events uploaded by this pass
    through: int  # the greatest seq the bucket holds
    latest: int  # the tenant's latest seq
    error: str | None = None

    @property
    def backlog(self) -> int:
        return max(0, self.latest - self.through)

    def as_json(self) -> dict[str, Any]:
        return {
            "tenant": str(self.tenant_id),
            "shipped": self.shipped,
            "through": self.through,
            "latest": self.latest,
            "backlog": self.backlog,
            "error": self.error,
        }


class BucketShipper:
    def __init__(self, pool: Pool, store: ObjectStore, prefix: str, *, batch: int = 1000) -> None:
        self.pool, self.store, self.prefix, self.batch = pool, store, prefix.strip("/"), batch
        self._through: dict[UUID, int] = {}  # what this process knows the bucket holds

    async def run_once(self, tenants: list[UUID] | None = None) -> list[TenantShipped]:
        """One pass over ``tenants`` (every tenant when None), each until caught up or failed."""
        if tenants is None:
            async with platform_transaction(self.pool, SCOPE) as conn:
                cur = await conn.execute("SELECT id FROM tenant ORDER BY id")
                tenants = [r["id"] for r in await cur.fetchall()]
        return [await self.ship_tenant(t) for t in tenants]

    async def ship_tenant(self, tenant_id: UUID) -> TenantShipped:
        shipped, through, error = 0, self._through.get(tenant_id), None
        try:
            if through is None:
                through = await self._read_through(tenant_id)
            while True:
                async with tenant_transaction(self.pool, SCOPE, tenant_id) as conn:
                    rows = await audit_sinks.events_after(conn, tenant_id, through, self.batch)
                if not rows:
                    break
                events = export_events(rows)
                first, last = int(events[0]["seq"]), int(events[-1]["seq"])
                body = b"".join(json.dumps(e, sort_keys=True).encode() + b"\n" for e in events)
                await obstore.put_async(
                    self.store, object_key(self.prefix, tenant_id, first, last), body
                )
                shipped, through = shipped + len(events), last
                self._through[tenant_id] = through
        except Exception as exc:  # the store, mostly: the next pass tries again from the bucket
            error = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
            self._through.pop(tenant_id, None)
        async with tenant_transaction(self.pool, SCOPE, tenant_id) as conn:
            cur = await conn.execute(
                "SELECT coalesce(max(seq), 0) AS latest FROM audit_event WHERE tenant_id = %s",
                (tenant_id,),
            )
            row = await cur.fetchone()
        latest = int(row["latest"]) if row is not None else 0
        return TenantShipped(tenant_id, shipped, through or 0, latest, error)

    async def _read_through(self, tenant_id: UUID) -> int:
        keys: list[str] = []
        async for page in obstore.list(self.store, tenant_folder(self.prefix, tenant_id) + "/"):
            keys += [str(meta["path"]) for meta in page]
        return exported_through(keys)
