"""Blob routes (04-API-SPEC §8), plain Starlette routes outside FastAPI since their bodies are
raw bytes: ``POST /v1/blobs`` (agent credential with ``send``) and ``GET /v1/blobs/{blb}``
(``gateway.blobs`` says who may read one)."""

from __future__ import annotations

import base64

from platformkit.http import FastJSONResponse
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from agentbus.gateway.actions import blobs
from agentbus.gateway.api.auth import authenticate_agent, authenticate_reader, client_ip
from agentbus.gateway.api.bodies import read_capped
from agentbus.gateway.context import get_gateway
from agentbus.gateway.domain.errors import BlobTooLarge


async def post_blob(request: Request) -> Response:
    gw = get_gateway(request)
    principal = await authenticate_agent(gw, request, "send")
    content_type = blobs.content_type_of(request.headers.get("content-type"))
    limit = await blobs.upload_limit(gw, principal.tenant_id)
    body = await read_capped(request, limit, BlobTooLarge)
    view = await blobs.store_blob(gw, principal, content_type, body)
    return FastJSONResponse(view, status_code=201)


async def get_blob(request: Request) -> Response:
    gw = get_gateway(request)
    who = await authenticate_reader(gw, request)
    client = (client_ip(request), request.headers.get("user-agent"))
    row, data = await blobs.open_blob(
        gw, who, request.path_params["blob_id"], request.query_params.get("message"),
        client=client,
    )  # fmt: skip
    digest = base64.b64encode(bytes(row["sha256"])).decode()
    headers = {"Content-Type": row["content_type"], "Digest": f"sha-256={digest}",
               "Cache-Control": "private, no-store"}  # fmt: skip
    return Response(data, headers=headers)  # the type as uploaded, no charset added


routes = [
    Route("/v1/blobs", post_blob, methods=["POST"]),
    Route("/v1/blobs/{blob_id}", get_blob, methods=["GET"]),
]
