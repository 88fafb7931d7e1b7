"""The presence hot path (plain Starlette route outside FastAPI, 04-API-SPEC §9):
``POST /v1/agents/{agt}/heartbeat`` with the agent's own credential -> 204."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from agentbus.gateway.actions.presence import Heartbeat, heartbeat
from agentbus.gateway.api.auth import authenticate_agent
from agentbus.gateway.api.bodies import read_model
from agentbus.gateway.context import get_gateway


async def post_heartbeat(request: Request) -> Response:
    gw = get_gateway(request)
    principal = await authenticate_agent(gw, request)
    body = await read_model(request, Heartbeat)
    await heartbeat(gw, principal, request.path_params["agent_id"], body)
    return Response(status_code=204)


routes = [Route("/v1/agents/{agent_id}/heartbeat", post_heartbeat, methods=["POST"])]
