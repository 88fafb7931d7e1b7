"""Delivery routes (04-API-SPEC.md §5), plain Starlette routes that the app puts on its own
router ahead of the included FastAPI routers (agent hot paths stay out of FastAPI's per-request
machinery, its route matching included; gateway.hot_openapi documents them):

- ``GET /v1/inbox`` long-poll, ``GET /v1/inbox/ws`` WebSocket (``delivery.ws``);
- ``POST /v1/inbox/ack`` transport ack, ``/nak``, ``/term`` (refuse), ``/read`` application ack.

Only the recipient's own credential with ``receive`` may use them. ``router`` carries
no routes, only the lifespan (run inside the gateway's) that installs the task rules and
starts delivery's background work.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import APIRouter, FastAPI
from platformkit.http import FastJSONResponse
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route, WebSocketRoute

from agentbus.delivery import bodies, longpoll, pull, settle
from agentbus.delivery.background import background
from agentbus.delivery.consumers import pending_estimate
from agentbus.delivery.service import service_of
from agentbus.delivery.settle import Item
from agentbus.delivery.ws import inbox_socket
from agentbus.gateway.api.auth import authenticate_agent
from agentbus.gateway.api.bodies import read_model
from agentbus.gateway.api.principals import AgentPrincipal
from agentbus.gateway.context import get_gateway


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    async with background(app):
        yield


router = APIRouter(lifespan=lifespan)


async def _receiver(request: Request) -> AgentPrincipal:
    return await authenticate_agent(get_gateway(request), request, "receive")


async def get_inbox(request: Request) -> Response:
    who = await _receiver(request)
    wait_s, max_items, max_bytes = bodies.poll_params(request.query_params)
    svc = service_of(request)
    async with (
        svc.connection(who.tenant_id, who.agent_id) as conn,
        longpoll.watch_client(request, conn.ended) as gone,
    ):
        deliveries = await pull.fetch(
            svc, who, wait_s=wait_s, max_items=max_items, max_bytes=max_bytes, stop=conn.ended
        )
        replaced, draining = conn.replaced.is_set(), conn.draining.is_set()
        if gone.is_set():
            await longpoll.hand_back(svc, who, deliveries)
            return Response(status_code=204)  # nobody reads it
    body: dict[str, Any] = {"deliveries": deliveries}
    if replaced and not deliveries:
        body["replaced"] = True
    else:
        body["pending_estimate"] = await pending_estimate(svc, who)
    if draining:
        body["draining"] = True  # the gateway is stopping: poll again after a pause
    return FastJSONResponse(body)


def _checked(request: Request, who: AgentPrincipal, items: list[Any]) -> list[Item]:
    return bodies.checked_items(service_of(request), who, items)


async def post_ack(request: Request) -> Response:
    who = await _receiver(request)
    body = await read_model(request, bodies.Acks, bodies.BODY_MAX)
    results = await settle.ack(service_of(request), who, _checked(request, who, body.acks))
    return FastJSONResponse({"results": results})


async def post_nak(request: Request) -> Response:
    who = await _receiver(request)
    body = await read_model(request, bodies.Naks, bodies.BODY_MAX)
    results = await settle.nak(service_of(request), who, _checked(request, who, body.naks))
    return FastJSONResponse({"results": results})


async def post_term(request: Request) -> Response:
    who = await _receiver(request)
    body = await read_model(request, bodies.Terms, bodies.BODY_MAX)
    results = await settle.term(service_of(request), who, _checked(request, who, body.terms))
    return FastJSONResponse({"results": results})


async def post_read(request: Request) -> Response:
    who = await _receiver(request)
    body = await read_model(request, bodies.Reads, bodies.BODY_MAX)
    svc = service_of(request)
    items = [settle.check(svc, who, item, None) for item in bodies.read_items(body)]
    return FastJSONResponse({"results": await settle.read(svc, who, items)})


routes = [
    Route("/v1/inbox", get_inbox, methods=["GET"]),
    Route("/v1/inbox/read", post_read, methods=["POST"]),
    Route("/v1/inbox/ack", post_ack, methods=["POST"]),
    Route("/v1/inbox/nak", post_nak, methods=["POST"]),
    Route("/v1/inbox/term", post_term, methods=["POST"]),
    WebSocketRoute("/v1/inbox/ws", inbox_socket),
]
