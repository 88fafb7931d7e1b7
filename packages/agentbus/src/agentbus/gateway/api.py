"""Management-style routes of the gateway (FastAPI, in the OpenAPI document): registration and
credentials (04-API-SPEC §2.1, §3), conversations (§7) and the JWKS (§1.2)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import JSONResponse

from agentbus.gateway import conversations
from agentbus.gateway.agent_spec import Registration
from agentbus.gateway.auth import authenticate_agent, require_agent, require_token
from agentbus.gateway.bodies import read_model
from agentbus.gateway.context import get_gateway
from agentbus.gateway.issuance import ProofBody, issue_credential, refresh_credential
from agentbus.gateway.principals import AgentPrincipal
from agentbus.gateway.registration import register_agent
from agentbus.gateway.signing import raw_public
from agentbus.gateway.views import ts
from agentbus.gateway.wire import b64url_encode
from agentbus.store.integration_tokens import VerifiedToken

router = APIRouter()
Agent = Annotated[AgentPrincipal, Depends(require_agent())]
RegisterToken = Annotated[VerifiedToken, Depends(require_token("register"))]
AnyToken = Annotated[VerifiedToken, Depends(require_token())]
Limit = Annotated[int, Query(ge=1, le=200)]


@router.post("/v1/agents", status_code=201, tags=["agents"])
async def post_agent(request: Request, token: RegisterToken) -> JSONResponse:
    """Register an agent and its first key (201), or find the same one again (200)."""
    registration = await read_model(request, Registration)
    done = await register_agent(get_gateway(request), token, registration)
    return JSONResponse(done.body, status_code=201 if done.created else 200)


@router.post("/v1/agents/{agent_id}/credentials", tags=["credentials"])
async def post_credentials(request: Request, agent_id: str, token: AnyToken) -> dict[str, Any]:
    """Issue an agent credential for a key proof."""
    body = await read_model(request, ProofBody)
    return await issue_credential(get_gateway(request), token, agent_id, body.proof)


@router.post("/v1/credentials/refresh", tags=["credentials"])
async def post_refresh(request: Request) -> dict[str, Any]:
    """Exchange the current credential and a fresh key proof for a new credential."""
    gw = get_gateway(request)
    principal = await authenticate_agent(gw, request)
    body = await read_model(request, ProofBody)
    return await refresh_credential(gw, principal, body.proof)


@router.get("/v1/conversations", tags=["conversations"])
async def get_conversations(request: Request, agent: Agent, limit: Limit = 50) -> dict[str, Any]:
    return await conversations.list_conversations(get_gateway(request), agent, limit)


@router.get("/v1/conversations/{conversation_id}", tags=["conversations"])
async def get_conversation(request: Request, conversation_id: str, agent: Agent) -> dict[str, Any]:
    return await conversations.read_conversation(get_gateway(request), agent, conversation_id)


@router.get("/v1/conversations/{conversation_id}/messages", tags=["conversations"])
async def get_conversation_messages(
    request: Request,
    conversation_id: str,
    agent: Agent,
    limit: Limit = 50,
    cursor: str | None = None,
) -> dict[str, Any]:
    return await conversations.list_conversation_messages(
        get_gateway(request), agent, conversation_id, limit=limit, cursor=cursor
    )


@router.get("/.well-known/jwks.json", tags=["keys"])
async def jwks(request: Request) -> dict[str, Any]:
    """Every platform signing key; retired ones stay, marked with ``retired_at``."""
    gw = get_gateway(request)
    await gw.signing.refresh(gw.pool)
    keys = []
    for kid, key in sorted(gw.signing.public.items()):
        jwk: dict[str, Any] = {
            "kty": "OKP", "crv": "Ed25519", "alg": "EdDSA", "use": "sig", "kid": kid,
            "x": b64url_encode(raw_public(key)),
        }  # fmt: skip
        if kid in gw.signing.retired:
            jwk["retired_at"] = ts(gw.signing.retired[kid])
        keys.append(jwk)
    return {"keys": keys}
