"""``/v1/analytics/...``: a conversation's trace across hops, cost per agent, task, model or
day, who talks to whom, and latency per stage against the SLO (``analytics.reads``)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request

from agentbus.analytics import reads
from agentbus.gateway.api.auth import AUDIT_SCOPES, require_tenant_wide, require_token
from agentbus.gateway.context import get_gateway
from agentbus.store.integration_tokens import VerifiedToken

router = APIRouter(tags=["analytics"])


async def _operator(token: Annotated[VerifiedToken, Depends(require_token())]) -> VerifiedToken:
    require_tenant_wide(token, AUDIT_SCOPES, "analytics")
    return token


Operator = Annotated[VerifiedToken, Depends(_operator)]
Since = Annotated[datetime | None, Query(description="From (inclusive); default 30 days ago.")]
Until = Annotated[datetime | None, Query(description="To (exclusive); default now.")]


@router.get("/v1/analytics/conversations/{conversation_id}/trace")
async def get_conversation_trace(
    request: Request, conversation_id: str, token: Operator
) -> dict[str, Any]:
    """Every event of the conversation's messages, by hop, with stage timings (ms)."""
    return await reads.trace(get_gateway(request), token.tenant_id, conversation_id)


@router.get("/v1/analytics/cost")
async def get_cost(
    request: Request,
    token: Operator,
    by: Annotated[str, Query(description="agent, task, model or day")] = "agent",
    since: Since = None,
    until: Until = None,
) -> dict[str, Any]:
    """Spend (USD, decimal text) and tokens per key and ``reported_by``."""
    return await reads.cost(get_gateway(request), token.tenant_id, by, since, until)


@router.get("/v1/analytics/graph")
async def get_graph(
    request: Request, token: Operator, since: Since = None, until: Until = None
) -> dict[str, Any]:
    """Who sent to whom: nodes and directed edges weighted by messages and bytes."""
    return await reads.graph(get_gateway(request), token.tenant_id, since, until)


@router.get("/v1/analytics/latency")
async def get_latency(
    request: Request,
    token: Operator,
    since: Since = None,
    until: Until = None,
    slo_ms: Annotated[int | None, Query(ge=1, le=3_600_000)] = None,
) -> dict[str, Any]:
    """p50/p95/p99 per stage (accept, publish, deliver, read) and the share within the SLO."""
    return await reads.latency(get_gateway(request), token.tenant_id, since, until, slo_ms)
