"""Support consent over the API (data model §1.9): the tenant owner opens a time-boxed window
for support staff, lists the windows, and closes one early. An integration token with
``admin``; the reads support makes inside a window show in ``GET /v1/audit/actions`` as
``support.read`` rows naming the window (``consent_ref``)."""

from __future__ import annotations

import uuid
from typing import Any

from fastapi import APIRouter, Request
from pydantic import Field

from agentbus.actions import support
from agentbus.errors import NotFound
from agentbus.gateway.api.admin import Caller
from agentbus.gateway.api.bodies import Body, read_model
from agentbus.gateway.api.views import ts

router = APIRouter(tags=["support"])


class NewConsent(Body):
    hours: float = Field(gt=0, le=168)
    ticket_ref: str | None = Field(None, max_length=200)


def consent_view(row: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": str(row["id"]),
        "granted_by": f"usr_{row['granted_by'].hex}",
        "scope": row["scope"],
        "starts_at": ts(row["starts_at"]),
        "ends_at": ts(row["ends_at"]),
        "revoked_at": None if row["revoked_at"] is None else ts(row["revoked_at"]),
        "ticket_ref": row["ticket_ref"],
    }


@router.post("/v1/support/consents", status_code=201)
async def post_consent(request: Request, who: Caller) -> dict[str, Any]:
    """Open a window of ``hours`` (at most 168) from now (tenant owner)."""
    body = await read_model(request, NewConsent)
    row = await support.grant_consent(
        who.ctx, who.tenant_id, hours=body.hours, ticket_ref=body.ticket_ref
    )  # fmt: skip
    return consent_view(row)


@router.get("/v1/support/consents")
async def get_consents(who: Caller) -> dict[str, Any]:
    """Every window of the tenant, newest first (tenant owner or admin)."""
    return {"items": [consent_view(r) for r in await support.list_consents(who.ctx, who.tenant_id)]}


@router.delete("/v1/support/consents/{consent_id}")
async def delete_consent(consent_id: str, who: Caller) -> dict[str, Any]:
    """Close a window now (tenant owner)."""
    try:
        parsed = uuid.UUID(consent_id)
    except ValueError as exc:
        raise NotFound(f"no support consent {consent_id}") from exc
    return consent_view(await support.revoke_consent(who.ctx, who.tenant_id, parsed))
