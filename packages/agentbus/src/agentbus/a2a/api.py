"""A2A routes (04-API-SPEC §12): the tenant's card at ``/.well-known/agent-card.json``, and the
JSON-RPC endpoints ``POST /a2a/v1`` (the tenant's: the agent named in the message) and
``POST /a2a/v1/agents/{agt}`` (one agent's), authenticated by an integration token.

The kernel's request guard screens these bodies as every JSON body (NUL, integers past 64 bits,
nesting, 1 MiB): those are AB problems before JSON-RPC is read. A body that is JSON but not a
JSON-RPC request, or a method's failure, is a JSON-RPC error object in a 200 answer, as JSON-RPC
over HTTP has it; the error's ``data`` names the AB code where one applies.
"""

from __future__ import annotations

from typing import Any

from platformkit import boundedjson
from platformkit.db.scope import tenant_transaction
from platformkit.http import FastJSONResponse
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from agentbus.a2a import cards
from agentbus.a2a.rpc import RpcError, dispatch
from agentbus.db import SCOPE
from agentbus.gateway.actions.agent_directory import viewer_of
from agentbus.gateway.api.auth import authenticate_either, authenticate_token
from agentbus.gateway.api.bodies import MANAGEMENT_BODY_MAX, MAX_DEPTH, read_capped
from agentbus.gateway.context import get_gateway
from agentbus.gateway.store import agents
from agentbus.store import tenants

CARD_AGENTS_MAX = 200


def base_url(request: Request) -> str:
    return str(request.base_url).rstrip("/")


async def well_known_card(request: Request) -> Response:
    gw = get_gateway(request)
    who = await authenticate_either(gw, request)
    async with tenant_transaction(gw.pool, SCOPE, who.tenant_id) as conn:
        tenant = await tenants.get_tenant(conn, who.tenant_id)
        assert tenant is not None
        rows = await agents.list_agents(
            conn, who.tenant_id, viewer_of(who), filters={}, after=None, limit=CARD_AGENTS_MAX
        )
    listed = [row for row in rows if row["name"] != "a2a-bridge"]
    return FastJSONResponse(cards.tenant_card(tenant, listed, base_url(request)))


def _answer(
    ident: Any, result: dict[str, Any] | None = None, error: RpcError | None = None
) -> Response:
    body: dict[str, Any] = {"jsonrpc": "2.0", "id": ident}
    if error is None:
        body["result"] = result
    else:
        body["error"] = {"code": error.code, "message": error.message, "data": error.data}
    return FastJSONResponse(body)


async def json_rpc(request: Request) -> Response:
    gw = get_gateway(request)
    token = await authenticate_token(gw, request)
    raw = await read_capped(request, MANAGEMENT_BODY_MAX)
    try:
        call = boundedjson.loads(raw, max_depth=MAX_DEPTH)
    except boundedjson.JsonRefused as exc:
        return _answer(None, error=RpcError(-32700, f"not JSON: {exc.reason}"))
    ident = call.get("id") if isinstance(call, dict) else None
    if not isinstance(ident, str | int) or isinstance(ident, bool):
        ident = None
    method, params = (
        (call.get("method"), call.get("params")) if isinstance(call, dict) else (None, None)
    )
    if not isinstance(call, dict) or call.get("jsonrpc") != "2.0" or not isinstance(method, str):
        return _answer(ident, error=RpcError(-32600, "a JSON-RPC 2.0 request object is expected"))
    if not isinstance(params, dict):
        return _answer(ident, error=RpcError(-32602, "params must be an object"))
    try:
        result = await dispatch(gw, token, method, params, request.path_params.get("agent_id"))
    except RpcError as error:
        return _answer(ident, error=error)
    return _answer(ident, result)


routes = [
    Route("/.well-known/agent-card.json", well_known_card, methods=["GET"]),
    Route("/a2a/v1", json_rpc, methods=["POST"]),
    Route("/a2a/v1/agents/{agent_id}", json_rpc, methods=["POST"]),
]
