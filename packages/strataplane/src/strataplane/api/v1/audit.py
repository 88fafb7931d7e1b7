"""The tenant's audit chain (permission audit.read): events newest first, and verification."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from fastapi import APIRouter
from platformkit.storable import PgBigInt

from strataplane.actions import audit
from strataplane.api.deps import TenantCtx
from strataplane.api.v1.common import Model, PageLimit

router = APIRouter(prefix="/audit", tags=["audit"])


class AuditEventOut(Model):
    seq: int
    ts: datetime
    actor_kind: str
    actor_id: str | None
    on_behalf_of: str | None
    action: str
    object_kind: str
    object_id: str
    request_id: str | None
    source_ip: str | None
    details: dict[str, Any]
    prev_hash: str | None
    hash: str


class ChainCheckOut(Model):
    chain: str
    ok: bool
    checked: int
    bad_row: int | None
    reason: str | None
    detail: str


def _event(row: dict[str, Any]) -> AuditEventOut:
    def text(value: Any) -> str | None:
        return None if value is None else str(value)

    return AuditEventOut(
        **{
            k: row[k]
            for k in (
                "seq",
                "ts",
                "actor_kind",
                "actor_id",
                "action",
                "object_kind",
                "object_id",
                "request_id",
                "details",
            )
        },
        on_behalf_of=text(row["on_behalf_of"]),
        source_ip=text(row["source_ip"]),
        prev_hash=bytes(row["prev_hash"]).hex() if row["prev_hash"] is not None else None,
        hash=bytes(row["hash"]).hex(),
    )


@router.get("/events")
async def list_events(
    ctx: TenantCtx, before: PgBigInt | None = None, limit: PageLimit = 100
) -> list[AuditEventOut]:
    return [_event(r) for r in await audit.list_audit_events(ctx, before=before, limit=limit)]


@router.get("/verify")
async def verify(ctx: TenantCtx) -> ChainCheckOut:
    return ChainCheckOut.model_validate(await audit.verify_audit(ctx))
