"""The agent hot path for sending (plain Starlette routes outside FastAPI, in hot_openapi): ``POST
/v1/messages`` (04-API-SPEC §4.1), ``POST /v1/messages/batch`` (§4.7) and ``GET
/v1/messages/{msg}`` (§4.3, for the parties and the tenant's operators) and ``POST
/v1/messages/{msg}/redrive`` (§4.6, for its sender and admin tokens).

``authenticate_sender``, ``read_send_body`` and ``send_response`` are what the typed task
routes reuse: authenticate, read the body, call ``send.send_envelope`` with their
``TaskRules``, render the result. ``answer_batch`` is the batch's work and answer, which the
delivery WebSocket's ``send`` frames share. Sends take from the sender's own bucket
(``send_limits``), so the answer's ``RateLimit-*`` headers are that bucket's.
"""

from __future__ import annotations

from typing import Any

from platformkit.http import FastJSONResponse, problem_body
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from agentbus.errors import AgentBusError, RequestInvalid
from agentbus.gateway.actions.hooks import SendResult
from agentbus.gateway.actions.messages import read_message
from agentbus.gateway.actions.redrive import redrive_message
from agentbus.gateway.actions.send import send_batch, send_envelope
from agentbus.gateway.api.auth import (
    authenticate_agent,
    authenticate_either,
    authenticate_reader,
    client_ip,
)
from agentbus.gateway.api.bodies import read_capped
from agentbus.gateway.api.principals import AgentPrincipal
from agentbus.gateway.context import Gateway, get_gateway
from agentbus.gateway.domain.envelope import (
    BATCH_BODY_MAX,
    SEND_BODY_MAX,
    BatchItems,
    parse_batch_body,
)


async def authenticate_sender(gw: Gateway, request: Request) -> AgentPrincipal:
    """An agent credential with ``send``; the send path checks the rate (AB-5003)."""
    return await authenticate_agent(gw, request, "send", limit=None)


async def read_send_body(request: Request) -> bytes:
    """The raw envelope, refused over 320 KiB (AB-5002) before it is parsed."""
    return await read_capped(request, SEND_BODY_MAX)


def _quota_headers(gw: Gateway, principal: AgentPrincipal) -> dict[str, str]:
    """The ``RateLimit-*`` headers of the sender's bucket, once the gateway knows its rate."""
    quota = gw.limits.quota(principal.tenant_id, principal.agent_id)
    return quota.headers() if quota else {}


def send_response(gw: Gateway, principal: AgentPrincipal, result: SendResult) -> FastJSONResponse:
    headers = _quota_headers(gw, principal) | result.headers
    return FastJSONResponse(result.body, status_code=result.status, headers=headers)


async def post_message(request: Request) -> Response:
    gw = get_gateway(request)
    principal = await authenticate_sender(gw, request)
    raw = await read_send_body(request)
    result = await send_envelope(gw, principal, raw, request.headers.get("content-type"))
    return send_response(gw, principal, result)


def _item(answer: SendResult | AgentBusError, instance: str) -> dict[str, Any]:
    if isinstance(answer, AgentBusError):
        return {"status": answer.status, "problem": problem_body(answer, instance)}
    item: dict[str, Any] = {"status": answer.status, **answer.body}
    if answer.replayed:
        item["replayed"] = True
    return item


async def answer_batch(
    gw: Gateway, principal: AgentPrincipal, envelopes: BatchItems, instance: str
) -> dict[str, Any]:
    """Send a batch (``parse_batch_body`` or ``batch_items``) and answer it: one result per
    envelope, in order, problems naming ``instance``. What ``POST /v1/messages/batch`` answers,
    and the delivery WebSocket's ``send`` frames (``delivery.send_frames``)."""
    answers = await send_batch(gw, principal, envelopes)
    return {"results": [_item(answer, instance) for answer in answers]}


async def post_batch(request: Request) -> Response:
    """Up to 100 envelopes; ``200`` with one result per envelope, in order (04 §4.7)."""
    gw = get_gateway(request)
    principal = await authenticate_sender(gw, request)
    raw = await read_capped(request, BATCH_BODY_MAX)
    envelopes = parse_batch_body(raw, request.headers.get("content-type"))
    body = await answer_batch(gw, principal, envelopes, request.url.path)
    return FastJSONResponse(body, headers=_quota_headers(gw, principal))


async def get_message(request: Request) -> Response:
    gw = get_gateway(request)
    reader = await authenticate_reader(gw, request)
    include = request.query_params.get("include")
    if include not in (None, "envelope"):
        raise RequestInvalid("include takes only 'envelope'", field="include")
    client = (client_ip(request), request.headers.get("user-agent"))
    body = await read_message(
        gw, reader, request.path_params["msg_id"], envelope=include == "envelope", client=client
    )
    return FastJSONResponse(body)


async def post_redrive(request: Request) -> Response:
    gw = get_gateway(request)
    who = await authenticate_either(gw, request)
    client = (client_ip(request), request.headers.get("user-agent"))
    body = await redrive_message(gw, who, request.path_params["msg_id"], client=client)
    return FastJSONResponse(body, status_code=202)


routes = [
    Route("/v1/messages", post_message, methods=["POST"]),
    Route("/v1/messages/batch", post_batch, methods=["POST"]),
    Route("/v1/messages/{msg_id}", get_message, methods=["GET"]),
    Route("/v1/messages/{msg_id}/redrive", post_redrive, methods=["POST"]),
]
