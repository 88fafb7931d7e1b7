"""Where messages are (04-API-SPEC.md §4.3-4.5), FastAPI routes in the OpenAPI document
(``delivery.traces``): traces, receipts and trace ids for a message's parties and the tenant's
operators, the message list for operators and for agents (their own messages)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request

from agentbus.delivery import traces
from agentbus.gateway.api import auth
from agentbus.gateway.context import get_gateway

router = APIRouter()


async def _reader(request: Request) -> auth.Reader:
    return await auth.authenticate_reader(get_gateway(request), request)


Reader = Annotated[auth.Reader, Depends(_reader)]


@router.get("/v1/messages", tags=["messages"])
async def get_messages(
    request: Request,
    who: Reader,
    status: str | None = None,
    sender: Annotated[str | None, Query(alias="from")] = None,
    recipient: Annotated[str | None, Query(alias="to")] = None,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
    cursor: str | None = None,
) -> dict[str, Any]:
    """The tenant's messages for an operator, the agent's own for an agent, newest first
    (metadata and ``dlq_reason``, never payloads), e.g. ``?status=dead_lettered&to=agt_...``."""
    return await traces.list_messages(
        get_gateway(request), who, status=status, sender=sender, recipient=recipient,
        limit=limit, cursor=cursor,
    )  # fmt: skip


@router.get("/v1/messages/{msg_id}/trace", tags=["messages"])
async def get_trace(request: Request, msg_id: str, who: Reader) -> dict[str, Any]:
    """Where a message has been: its current state, receipts and the steps its rows prove."""
    return await traces.read_trace(get_gateway(request), who, msg_id)


@router.get("/v1/receipts/{receipt_id}", tags=["messages"])
async def get_receipt(request: Request, receipt_id: str, who: Reader) -> dict[str, Any]:
    """A receipt, whether it verifies against the platform's keys, and its message's status."""
    return await traces.read_receipt(get_gateway(request), who, receipt_id)


@router.get("/v1/traces/{trace_id}", tags=["messages"])
async def get_trace_messages(request: Request, trace_id: str, who: Reader) -> dict[str, Any]:
    """The messages that share a trace id and the caller may see, oldest first."""
    return await traces.read_trace_messages(get_gateway(request), who, trace_id)
