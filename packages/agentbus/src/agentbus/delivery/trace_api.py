"""Trace routes (04-API-SPEC.md §4.4, §4.5): FastAPI routes, in the OpenAPI document, for the
sender and recipient of a message (``delivery.traces``)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request

from agentbus.delivery import traces
from agentbus.gateway.auth import require_agent
from agentbus.gateway.context import get_gateway
from agentbus.gateway.principals import AgentPrincipal

router = APIRouter()
Party = Annotated[AgentPrincipal, Depends(require_agent())]


@router.get("/v1/messages/{msg_id}/trace", tags=["messages"])
async def get_trace(request: Request, msg_id: str, who: Party) -> dict[str, Any]:
    """Where a message has been: its current state, receipts and the steps its rows prove."""
    return await traces.read_trace(get_gateway(request), who, msg_id)


@router.get("/v1/receipts/{receipt_id}", tags=["messages"])
async def get_receipt(request: Request, receipt_id: str, who: Party) -> dict[str, Any]:
    """A receipt, whether it verifies against the platform's keys, and its message's status."""
    return await traces.read_receipt(get_gateway(request), who, receipt_id)


@router.get("/v1/traces/{trace_id}", tags=["messages"])
async def get_trace_messages(request: Request, trace_id: str, who: Party) -> dict[str, Any]:
    """The caller's messages that share a trace id, oldest first."""
    return await traces.read_trace_messages(get_gateway(request), who, trace_id)
