"""Trust anchors: CAs for agents' client certificates (docs/strataplane/security.md)."""

from __future__ import annotations

from datetime import datetime
from typing import Literal
from uuid import UUID

from fastapi import APIRouter, Depends, Response
from pydantic import Field

from strataplane.actions import trust_anchors
from strataplane.api.deps import TenantCtx, idempotency_key
from strataplane.api.v1.common import Model
from strataplane.domain.certificates import MAX_PEM

router = APIRouter(prefix="/api/v1/trust-anchors", tags=["trust anchors"])


class TrustAnchorIn(Model):
    name: str = Field(min_length=1, max_length=63)
    ca_pem: str = Field(min_length=1, max_length=MAX_PEM, description="One CA certificate, PEM.")
    crl_url: str | None = Field(None, max_length=2048)
    host_mapping: Literal["san-dns", "cn", "san-uri-spiffe"] = "san-dns"


class TrustAnchorOut(Model):
    id: UUID
    name: str
    ca_pem: str
    crl_url: str | None
    host_mapping: str
    created_at: datetime


class RevokedOut(Model):
    agents_unbound: int


@router.post("", status_code=201, dependencies=[Depends(idempotency_key)])
async def add_trust_anchor(
    ctx: TenantCtx, body: TrustAnchorIn, response: Response
) -> TrustAnchorOut:
    anchor = await trust_anchors.add_trust_anchor(
        ctx, body.name, body.ca_pem, crl_url=body.crl_url, host_mapping=body.host_mapping
    )
    response.headers["Location"] = f"/api/v1/trust-anchors/{anchor.id}"
    return TrustAnchorOut.model_validate(anchor)


@router.get("")
async def list_trust_anchors(ctx: TenantCtx) -> list[TrustAnchorOut]:
    return [TrustAnchorOut.model_validate(a) for a in await trust_anchors.list_trust_anchors(ctx)]


@router.get("/{anchor_id}")
async def get_trust_anchor(ctx: TenantCtx, anchor_id: UUID) -> TrustAnchorOut:
    return TrustAnchorOut.model_validate(await trust_anchors.access_trust_anchor(ctx, anchor_id))


@router.delete("/{anchor_id}")
async def revoke_trust_anchor(ctx: TenantCtx, anchor_id: UUID) -> RevokedOut:
    """Delete the anchor; agents bound through it drop to assurance low."""
    return RevokedOut(agents_unbound=await trust_anchors.revoke_trust_anchor(ctx, anchor_id))
