"""Administration routes (04-API-SPEC §10.1-10.4), FastAPI routes in the OpenAPI document: the
tenant, its workspaces, users and integration tokens, for a tenant-wide token with ``admin``
(``gateway.administration``); creating and listing tenants, for the platform operator
(``gateway.operator``)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse, Response

from agentbus.actions import tenants
from agentbus.actions.context import Ctx
from agentbus.gateway.actions import administration as adm
from agentbus.gateway.actions import tenant_deletion
from agentbus.gateway.api import operator
from agentbus.gateway.api.auth import authenticate_token, client_ip
from agentbus.gateway.api.bodies import read_model
from agentbus.gateway.context import get_gateway
from agentbus.ids import format_id
from agentbus.store.integration_tokens import VerifiedToken

router = APIRouter(tags=["administration"])


class Admin:
    """The caller's token and the action context it acts in."""

    def __init__(self, token: VerifiedToken, ctx: Ctx) -> None:
        self.token, self.ctx, self.tenant_id = token, ctx, token.tenant_id


async def _admin(request: Request) -> Admin:
    gw = get_gateway(request)
    token = await authenticate_token(gw, request)
    client = (client_ip(request), request.headers.get("user-agent"))
    return Admin(token, adm.acting(gw, token, client))


Caller = Annotated[Admin, Depends(_admin)]


@router.post("/v1/tenants", status_code=201)
async def post_tenant(request: Request) -> JSONResponse:
    """Create a tenant with its owner and a bootstrap token (platform operator); the token is
    in this answer only."""
    gw = get_gateway(request)
    ctx = operator.authenticate_operator(gw, request)
    body = await read_model(request, operator.NewTenant)
    created = await operator.create_tenant(ctx, body)
    assert created.owner_user is not None
    assert created.bootstrap_token is not None
    issued = created.bootstrap_token
    answer = {
        "tenant": adm.tenant_view(created.tenant),
        "owner_user": {"id": format_id("usr", created.owner_user["id"])},
        "bootstrap_token": {"id": format_id("tok", issued.row["id"]), "token": issued.plaintext},
    }
    return JSONResponse(answer, status_code=201, headers={"Cache-Control": "no-store"})


@router.get("/v1/tenants")
async def get_tenants(request: Request) -> dict[str, Any]:
    """Every tenant (platform operator)."""
    ctx = operator.authenticate_operator(get_gateway(request), request)
    return {"items": [adm.tenant_view(row) for row in await tenants.list_tenants(ctx)]}


@router.get("/v1/tenants/{tenant_id}")
async def get_tenant(tenant_id: str, who: Caller) -> dict[str, Any]:
    """The caller's own tenant with its effective plan limits."""
    return await adm.read_tenant(who.ctx, who.tenant_id, tenant_id)


@router.patch("/v1/tenants/{tenant_id}")
async def patch_tenant(request: Request, tenant_id: str, who: Caller) -> dict[str, Any]:
    """Change ``display_name``, ``settings`` or, on the enterprise plan, ``retention_days``
    (tenant owner or admin)."""
    body = await read_model(request, adm.TenantChange)
    gw = get_gateway(request)
    return await adm.change_tenant(who.ctx, gw, who.tenant_id, tenant_id, body)


@router.delete("/v1/tenants/{tenant_id}", status_code=202)
async def delete_tenant(request: Request, tenant_id: str, who: Caller) -> dict[str, Any]:
    """Crypto-shred the tenant (its owner, with ``AgentBus-Confirm: <ten_ id>``): payloads and
    blobs become unreadable at once; tokens are revoked and agents disabled."""
    adm.own_tenant(who.tenant_id, tenant_id)
    confirm = request.headers.get(tenant_deletion.CONFIRM_HEADER)
    row = await tenant_deletion.delete_tenant(who.ctx, get_gateway(request), who.tenant_id, confirm)
    return adm.tenant_view(row)


@router.post("/v1/workspaces", status_code=201)
async def post_workspace(request: Request, who: Caller) -> dict[str, Any]:
    """Create a workspace (tenant owner or admin)."""
    body = await read_model(request, adm.NewWorkspace)
    return await adm.create_workspace(who.ctx, who.tenant_id, body)


@router.get("/v1/workspaces")
async def get_workspaces(who: Caller) -> dict[str, Any]:
    return {"items": await adm.list_workspaces(who.ctx, who.tenant_id)}


@router.get("/v1/workspaces/{workspace_id}")
async def get_workspace(workspace_id: str, who: Caller) -> dict[str, Any]:
    return await adm.read_workspace(who.ctx, who.tenant_id, workspace_id)


@router.patch("/v1/workspaces/{workspace_id}")
async def patch_workspace(request: Request, workspace_id: str, who: Caller) -> dict[str, Any]:
    """Change ``display_name``, ``description`` or ``settings`` (slugs never change)."""
    body = await read_model(request, adm.WorkspaceChange)
    return await adm.change_workspace(who.ctx, who.tenant_id, workspace_id, body)


@router.delete("/v1/workspaces/{workspace_id}", status_code=204)
async def delete_workspace(workspace_id: str, who: Caller) -> Response:
    """Delete a workspace without live agents (AB-8008 otherwise)."""
    await adm.delete_workspace(who.ctx, who.tenant_id, workspace_id)
    return Response(status_code=204)


@router.get("/v1/workspaces/{workspace_id}/members")
async def get_members(workspace_id: str, who: Caller) -> dict[str, Any]:
    return {"items": await adm.list_members(who.ctx, who.tenant_id, workspace_id)}


@router.put("/v1/workspaces/{workspace_id}/members/{user_id}")
async def put_member(
    request: Request, workspace_id: str, user_id: str, who: Caller
) -> dict[str, Any]:
    """Add a tenant member to the workspace with a role, or change its role."""
    body = await read_model(request, adm.Membership)
    return await adm.set_member(who.ctx, who.tenant_id, workspace_id, user_id, body)


@router.delete("/v1/workspaces/{workspace_id}/members/{user_id}", status_code=204)
async def delete_member(workspace_id: str, user_id: str, who: Caller) -> Response:
    await adm.remove_member(who.ctx, who.tenant_id, workspace_id, user_id)
    return Response(status_code=204)


@router.get("/v1/users")
async def get_users(who: Caller) -> dict[str, Any]:
    return {"items": await adm.list_users(who.ctx, who.tenant_id)}


@router.get("/v1/users/{user_id}")
async def get_user(user_id: str, who: Caller) -> dict[str, Any]:
    return await adm.read_user(who.ctx, who.tenant_id, user_id)


@router.patch("/v1/users/{user_id}")
async def patch_user(request: Request, user_id: str, who: Caller) -> dict[str, Any]:
    """Disable or enable a user, or change its tenant role; ``active_tokens`` lists the tokens
    still in force, which disabling does not revoke."""
    body = await read_model(request, adm.UserChange)
    return await adm.change_user(who.ctx, who.tenant_id, user_id, body)


@router.post("/v1/tokens", status_code=201)
async def post_token(request: Request, who: Caller) -> JSONResponse:
    """Mint a token; ``token`` (the plaintext) is in this answer only."""
    body = await read_model(request, adm.NewToken)
    created = await adm.create_token(who.ctx, who.token, body)
    return JSONResponse(created, status_code=201, headers={"Cache-Control": "no-store"})


@router.get("/v1/tokens")
async def get_tokens(
    who: Caller, owner: str | None = None, include_revoked: bool = False
) -> dict[str, Any]:
    """The tenant's tokens: prefix and last four characters, never the token."""
    return {"items": await adm.list_tokens(who.ctx, who.tenant_id, owner, include_revoked)}


@router.get("/v1/tokens/{token_id}")
async def get_token(token_id: str, who: Caller) -> dict[str, Any]:
    return await adm.read_token(who.ctx, who.tenant_id, token_id)


@router.delete("/v1/tokens/{token_id}")
async def delete_token(request: Request, token_id: str, who: Caller) -> dict[str, Any]:
    """Revoke a token (a repeat returns it unchanged); credentials made from it stop working."""
    body = await read_model(request, adm.Revocation)
    return await adm.revoke_token(who.ctx, who.tenant_id, token_id, body.reason)
