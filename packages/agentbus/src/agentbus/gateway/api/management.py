"""Management-style routes of the gateway (FastAPI, in the OpenAPI document): registration and
credentials (04-API-SPEC §2.1, §3), the directory, changes and an agent's keys (§2.2-2.4),
conversations (§7), the audit log of actions (§10.5) and the JWKS (§1.2)."""

from __future__ import annotations

import contextlib
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import JSONResponse, Response

from agentbus.gateway.actions import (
    agent_admin,
    agent_directory,
    agent_keys,
    audit_log,
    conversations,
)
from agentbus.gateway.actions.issuance import ProofBody, issue_credential, refresh_credential
from agentbus.gateway.actions.registration import register_agent
from agentbus.gateway.actions.signing import raw_public
from agentbus.gateway.api.auth import (
    Reader,
    authenticate_agent,
    authenticate_either,
    require_agent,
    require_token,
)
from agentbus.gateway.api.bodies import read_model
from agentbus.gateway.api.principals import AgentPrincipal
from agentbus.gateway.api.request_limits import Kind, note_quota
from agentbus.gateway.api.views import ts
from agentbus.gateway.context import get_gateway
from agentbus.gateway.domain.agent_spec import Registration
from agentbus.gateway.domain.wire import b64url_encode
from agentbus.ids import InvalidId, parse_id
from agentbus.store.integration_tokens import VerifiedToken

router = APIRouter()
Agent = Annotated[AgentPrincipal, Depends(require_agent())]
RegisterToken = Annotated[
    VerifiedToken, Depends(require_token("register", limit=Kind.REGISTRATION))
]
AnyToken = Annotated[VerifiedToken, Depends(require_token())]
IssuingToken = Annotated[VerifiedToken, Depends(require_token(limit=None))]  # by agent, below
Limit = Annotated[int, Query(ge=1, le=200)]


async def _either(request: Request) -> Reader:
    return await authenticate_either(get_gateway(request), request)


Either = Annotated[Reader, Depends(_either)]


@router.post("/v1/agents", status_code=201, tags=["agents"])
async def post_agent(request: Request, token: RegisterToken) -> JSONResponse:
    """Register an agent and its first key (201), or find the same one again (200)."""
    registration = await read_model(request, Registration)
    done = await register_agent(get_gateway(request), token, registration)
    return JSONResponse(done.body, status_code=201 if done.created else 200)


@router.post("/v1/agents/{agent_id}/credentials", tags=["credentials"])
async def post_credentials(request: Request, agent_id: str, token: IssuingToken) -> dict[str, Any]:
    """Issue an agent credential for a key proof (30 a minute for each agent)."""
    gw = get_gateway(request)
    with contextlib.suppress(InvalidId):  # a malformed id is AB-8002 below
        note_quota(request, gw.request_limits.take(Kind.CREDENTIALS, parse_id("agt", agent_id)))
    body = await read_model(request, ProofBody)
    return await issue_credential(gw, token, agent_id, body.proof)


@router.post("/v1/credentials/refresh", tags=["credentials"])
async def post_refresh(request: Request) -> dict[str, Any]:
    """Exchange the current credential and a fresh key proof for a new credential."""
    gw = get_gateway(request)
    principal = await authenticate_agent(gw, request, limit=Kind.CREDENTIALS)
    body = await read_model(request, ProofBody)
    return await refresh_credential(gw, principal, body.proof)


@router.get("/v1/agents", tags=["agents"])
async def get_agents(
    request: Request,
    who: Either,
    workspace: str | None = None,
    capability: str | None = None,
    status: str | None = None,
    q: str | None = None,
    limit: Limit = 50,
    cursor: str | None = None,
) -> dict[str, Any]:
    """The directory: agents the caller may see, oldest first, e.g. ``?capability=code.review``."""
    return await agent_directory.list_directory(
        get_gateway(request), who, workspace=workspace, capability=capability, status=status,
        q=q, limit=limit, cursor=cursor,
    )  # fmt: skip


@router.get("/v1/agents/{agent_id}", tags=["agents"])
async def get_agent(request: Request, agent_id: str, who: Either) -> dict[str, Any]:
    """One agent: its registration, status, last heartbeat and card."""
    return await agent_directory.read_agent(get_gateway(request), who, agent_id)


@router.patch("/v1/agents/{agent_id}", tags=["agents"])
async def patch_agent(request: Request, agent_id: str, who: Either) -> dict[str, Any]:
    """Change an agent: the agent itself its description, capabilities, card and harness
    version; its owner or a workspace admin (token) everything, including ``status``."""
    patch = await read_model(request, agent_admin.AgentPatch)
    return await agent_admin.update_agent(get_gateway(request), who, agent_id, patch)


@router.delete("/v1/agents/{agent_id}", status_code=204, tags=["agents"])
async def delete_agent(request: Request, agent_id: str, token: AnyToken) -> Response:
    """Delete an agent (owner or workspace admin): what waits for it is discarded."""
    await agent_admin.delete_agent(get_gateway(request), token, agent_id)
    return Response(status_code=204)


@router.get("/v1/agents/{agent_id}/card", tags=["agents"])
async def get_agent_card(request: Request, agent_id: str, who: Either) -> dict[str, Any]:
    """The agent's A2A agent card (protocol 1.0), with its JSON-RPC interface."""
    base = str(request.base_url).rstrip("/")
    return await agent_directory.read_card(get_gateway(request), who, agent_id, base)


@router.get("/v1/agents/{agent_id}/keys", tags=["agents"])
async def get_agent_keys(request: Request, agent_id: str, who: Either) -> list[dict[str, Any]]:
    """The agent's keys, oldest first, with their public keys (to verify its signatures)."""
    return await agent_keys.list_keys(get_gateway(request), who, agent_id)


@router.post("/v1/agents/{agent_id}/keys", status_code=201, tags=["agents"])
async def post_agent_key(request: Request, agent_id: str, who: Either) -> JSONResponse:
    """Add a key (rotation, or a new key after a revoked or expired one), proven by the new
    key: 201, or 200 for a key the agent holds."""
    body = await read_model(request, agent_keys.NewKey)
    view, added = await agent_keys.add_key(get_gateway(request), who, agent_id, body)
    return JSONResponse(view, status_code=201 if added else 200)


@router.delete("/v1/agents/{agent_id}/keys/{key_id}", status_code=204, tags=["agents"])
async def delete_agent_key(request: Request, agent_id: str, key_id: str, who: Either) -> Response:
    """Revoke a key; never the agent's last usable one."""
    await agent_keys.revoke_key(get_gateway(request), who, agent_id, key_id)
    return Response(status_code=204)


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


@router.get("/v1/audit/actions", tags=["audit"])
async def get_audit_actions(
    request: Request,
    token: AnyToken,
    action: str | None = None,
    target: str | None = None,
    limit: Limit = 50,
    cursor: str | None = None,
) -> dict[str, Any]:
    """The tenant's elevated actions, newest first (``read_audit`` or ``admin``), e.g.
    ``?action=message.view_payload`` or ``?target=msg_...``."""
    return await audit_log.list_actions(
        get_gateway(request), token, action=action, target=target, limit=limit, cursor=cursor
    )
