"""The audit chain over the API (04-API-SPEC §10.5, data model §2.5): its rows, a verification
that names the first bad row and the checkpoint it breaks, an export as JSON Lines, checkpoints
on demand, and the public list of signed checkpoints.

Reads take a tenant-wide token with ``read_audit`` or ``admin`` (the chain names no workspace,
so a token bound to one is AB-1015); a checkpoint on demand takes ``admin`` and a tenant owner or
admin behind the token. ``GET /audit/checkpoints`` is public: signed hashes reveal nothing.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse, StreamingResponse
from platformkit.db.scope import tenant_transaction

from agentbus.actions import audit_chain as chain
from agentbus.db import SCOPE
from agentbus.errors import RequestInvalid
from agentbus.gateway.actions.administration import acting
from agentbus.gateway.api.auth import AUDIT_SCOPES, client_ip, require_tenant_wide
from agentbus.gateway.api.management import AnyToken
from agentbus.gateway.context import get_gateway
from agentbus.ids import InvalidId, parse_id
from agentbus.store import audit_chain

router = APIRouter(tags=["audit"])
Seq = Annotated[int, Query(ge=1, le=2**62)]
WHAT = "the audit chain"


@router.get("/v1/audit/events")
async def get_audit_events(
    request: Request,
    token: AnyToken,
    from_seq: Seq = 1,
    to_seq: Seq | None = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 200,
) -> dict[str, Any]:
    """The tenant's chain rows in seq order from ``from_seq``; ``next_from_seq`` while more
    may follow."""
    require_tenant_wide(token, AUDIT_SCOPES, WHAT)
    gw = get_gateway(request)
    async with tenant_transaction(gw.pool, SCOPE, token.tenant_id) as conn:
        items = await chain.list_rows(
            conn, token.tenant_id, from_seq=from_seq, to_seq=to_seq, limit=limit
        )
    more = len(items) == limit
    return {"items": items, "next_from_seq": items[-1]["seq"] + 1 if more else None}


@router.get("/v1/audit/verify")
async def get_audit_verify(request: Request, token: AnyToken) -> dict[str, Any]:
    """Walk the whole chain: ``ok``, or the first bad row (``first_bad_seq``, ``reason``) and
    the checkpoint it breaks (``broken_checkpoint``)."""
    require_tenant_wide(token, AUDIT_SCOPES, WHAT)
    gw = get_gateway(request)
    async with tenant_transaction(gw.pool, SCOPE, token.tenant_id) as conn:
        report = await chain.verify_chain_of(conn, token.tenant_id, await chain.public_keys(conn))
    return report.view()


@router.get(
    "/v1/audit/export",
    response_class=StreamingResponse,
    responses={200: {"content": {"application/jsonl": {}}}},
)
async def get_audit_export(
    request: Request, token: AnyToken, from_seq: Seq = 1, to_seq: Seq | None = None
) -> StreamingResponse:
    """The chain as JSON Lines, one row a line; audit actions carry their full row."""
    require_tenant_wide(token, AUDIT_SCOPES, WHAT)
    gw = get_gateway(request)

    async def lines() -> AsyncIterator[bytes]:
        async with tenant_transaction(gw.pool, SCOPE, token.tenant_id) as conn:
            async for line in chain.export_lines(
                conn, token.tenant_id, from_seq=from_seq, to_seq=to_seq
            ):
                yield line

    return StreamingResponse(lines(), media_type="application/jsonl")


@router.post("/v1/audit/checkpoints", status_code=201)
async def post_audit_checkpoint(request: Request, token: AnyToken) -> JSONResponse:
    """Sign a checkpoint of the chain now (tenant owner or admin)."""
    gw = get_gateway(request)
    ctx = acting(gw, token, (client_ip(request), request.headers.get("user-agent")))
    row = await chain.checkpoint_tenant(ctx, token.tenant_id, gw.signing.signer)
    return JSONResponse(chain.row_view(row), status_code=201)


@router.get("/audit/checkpoints")
async def get_public_checkpoints(
    request: Request, tenant: str, after_seq: Annotated[int, Query(ge=0, le=2**62)] = 0
) -> dict[str, Any]:
    """Signed checkpoints of a tenant's chain, for independent verification (no credential):
    ``seq``, ``row_hash``, ``signature`` over ``audit-checkpoint/v1`` and the chain name,
    ``signing_kid`` (its public key is in the JWKS), ``at``."""
    try:
        tenant_id = parse_id("ten", tenant)
    except InvalidId as exc:
        raise RequestInvalid("tenant takes a ten_ id", field="tenant") from exc
    gw = get_gateway(request)
    async with tenant_transaction(gw.pool, SCOPE, tenant_id) as conn:
        rows = await audit_chain.checkpoints(conn, tenant_id, after_seq=after_seq, limit=200)
    return {
        "chain": audit_chain.chain_name(tenant_id),
        "items": [
            {k: v for k, v in chain.row_view(r).items()
             if k in ("seq", "at", "row_hash", "signature", "signing_kid")}
            for r in rows
        ],
    }  # fmt: skip
