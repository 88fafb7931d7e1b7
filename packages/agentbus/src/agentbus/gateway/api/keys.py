"""Tenant keys over the API (data model §5.3, §5.4): the data key versions, a rotation on
demand, and the tenant's key encryption key (bring your own AWS KMS key, or back to the
platform's). An integration token with ``admin``; rotation takes a tenant owner or admin, the
KEK its owner."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from pydantic import Field

from agentbus.actions import keys
from agentbus.gateway.api.admin import Caller
from agentbus.gateway.api.bodies import Body, read_model
from agentbus.gateway.api.views import ts
from agentbus.gateway.context import get_gateway

router = APIRouter(tags=["keys"])


class KekChange(Body):
    kek_ref: str = Field(min_length=1, max_length=2048)


def _version(row: dict[str, Any]) -> dict[str, Any]:
    return {**row, "created_at": ts(row["created_at"]),
            "retired_at": None if row["retired_at"] is None else ts(row["retired_at"])}  # fmt: skip


@router.get("/v1/keys")
async def get_keys(who: Caller) -> dict[str, Any]:
    """The tenant's KEK reference and its data key versions (never the keys)."""
    listed = await keys.list_keys(who.ctx, who.tenant_id)
    return {**listed, "versions": [_version(v) for v in listed["versions"]]}


@router.post("/v1/keys/rotate", status_code=201)
async def post_key_rotation(request: Request, who: Caller) -> dict[str, Any]:
    """A new active data key; payloads sealed before stay readable under their version."""
    row = await keys.rotate_data_key(who.ctx, who.tenant_id, get_gateway(request).crypto)
    return _version(row)


@router.put("/v1/keys/kek")
async def put_kek(request: Request, who: Caller) -> dict[str, Any]:
    """Use ``kek_ref`` (``kms://aws/<key ARN>``, or ``kms://platform/deployment-keyring``) as
    the tenant's KEK: proven with a wrap and an unwrap first, then every data key is re-wrapped
    under it and a new one made (tenant owner; enterprise plan for a key of the tenant's own)."""
    body = await read_model(request, KekChange)
    return await keys.set_kek(who.ctx, who.tenant_id, body.kek_ref, get_gateway(request).crypto)
