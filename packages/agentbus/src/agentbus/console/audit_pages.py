"""The console's audit log (``/console/audit``): the tenant's audit chain, newest row first, a
page at a time, and Verify, which walks the whole chain as ``GET /v1/audit/verify`` does and
names the first bad row and the checkpoint it breaks, or says the chain verifies."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from platformkit.db.scope import tenant_transaction
from starlette.responses import Response

from agentbus.actions import audit_chain as chain
from agentbus.console.pages import _html, _page, console_token, signed_form, signed_in
from agentbus.console.sessions import Operator
from agentbus.db import SCOPE
from agentbus.gateway.actions.administration import acting
from agentbus.gateway.context import get_gateway
from agentbus.store import audit_chain

router = APIRouter(include_in_schema=False)
PAGE = 50


async def _audit_page(
    request: Request, op: Operator, before: int | None, report: dict[str, Any] | None
) -> Response:
    async with tenant_transaction(get_gateway(request).pool, SCOPE, op.tenant_id) as conn:
        head = await audit_chain.head(conn, op.tenant_id)
        top = int(head["seq"]) if head else 0
        if before is not None:
            top = min(top, before - 1)
        rows: list[dict[str, Any]] = []
        if top >= 1:
            rows = await chain.list_rows(conn, op.tenant_id, from_seq=max(1, top - PAGE + 1),
                                         to_seq=top, limit=PAGE)  # fmt: skip
    rows.reverse()
    older = rows[-1]["seq"] if rows and rows[-1]["seq"] > 1 else None
    return await _page(request, op, "audit.html", title="Audit log", nav="audit", rows=rows,
                       older=older, report=report)  # fmt: skip


@router.get("/console/audit")
@signed_in
async def audit_page(request: Request, op: Operator, before: int | None = None) -> Response:
    if before is not None and not 1 <= before <= 2**62:
        return _html("before takes a sequence number", 422)
    return await _audit_page(request, op, before, None)


@router.post("/console/audit/verify")
@signed_form
async def verify(request: Request, op: Operator, _form: dict[str, Any]) -> Response:
    client = (request.client.host if request.client else None, request.headers.get("user-agent"))
    ctx = acting(get_gateway(request), console_token(op), client)
    report = await chain.verify_tenant(ctx, op.tenant_id)
    return await _audit_page(request, op, None, report.view())
