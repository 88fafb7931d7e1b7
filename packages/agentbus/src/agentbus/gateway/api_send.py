"""The agent hot path for sending (plain Starlette routes, outside OpenAPI): ``POST
/v1/messages`` (04-API-SPEC §4.1) and ``GET /v1/messages/{msg}`` (§4.3, for the parties).

``read_send_body`` and ``send_response`` are what the typed task routes reuse: authenticate
with ``authenticate_agent(gw, request, "send")``, read the body, call ``send.send_envelope``
with their ``TaskRules``, render the result.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from agentbus.errors import RequestInvalid
from agentbus.gateway.auth import authenticate_agent
from agentbus.gateway.bodies import read_capped
from agentbus.gateway.context import get_gateway
from agentbus.gateway.envelope import SEND_BODY_MAX
from agentbus.gateway.hooks import SendResult
from agentbus.gateway.messages import read_message
from agentbus.gateway.send import send_envelope


async def read_send_body(request: Request) -> bytes:
    """The raw envelope, refused over 320 KiB (AB-5002) before it is parsed."""
    return await read_capped(request, SEND_BODY_MAX)


def send_response(result: SendResult) -> JSONResponse:
    return JSONResponse(result.body, status_code=result.status, headers=result.headers)


async def post_message(request: Request) -> Response:
    gw = get_gateway(request)
    principal = await authenticate_agent(gw, request, "send")
    raw = await read_send_body(request)
    result = await send_envelope(gw, principal, raw, request.headers.get("content-type"))
    return send_response(result)


async def get_message(request: Request) -> Response:
    gw = get_gateway(request)
    principal = await authenticate_agent(gw, request)
    include = request.query_params.get("include")
    if include not in (None, "envelope"):
        raise RequestInvalid("include takes only 'envelope'", field="include")
    body = await read_message(
        gw, principal, request.path_params["msg_id"], envelope=include == "envelope"
    )
    return JSONResponse(body)


routes = [
    Route("/v1/messages", post_message, methods=["POST"]),
    Route("/v1/messages/{msg_id}", get_message, methods=["GET"]),
]
