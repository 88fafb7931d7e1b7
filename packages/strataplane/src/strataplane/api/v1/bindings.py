"""Role bindings (tenant admins)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal
from uuid import UUID

from fastapi import APIRouter, Depends, Response

from strataplane.actions import bindings
from strataplane.api.deps import TenantCtx, idempotency_key
from strataplane.api.v1.common import Model, Page, PageLimit, RoleName, page

router = APIRouter(prefix="/role-bindings", tags=["role bindings"])


class RoleBindingIn(Model):
    role: RoleName
    user_id: UUID | None = None
    team_id: UUID | None = None
    scope_kind: Literal["tenant", "owner", "selector"] = "tenant"
    scope_team_id: UUID | None = None
    scope_selector: dict[str, Any] | None = None


class RoleBindingOut(Model):
    id: UUID
    user_id: UUID | None
    team_id: UUID | None
    role: str
    scope_kind: str
    scope_team_id: UUID | None
    scope_selector: dict[str, Any] | None
    created_by: UUID | None
    created_at: datetime


@router.post("", status_code=201, dependencies=[Depends(idempotency_key)])
async def create_role_binding(
    ctx: TenantCtx, body: RoleBindingIn, response: Response
) -> RoleBindingOut:
    binding = await bindings.create_role_binding(
        ctx,
        role=body.role,
        user_id=body.user_id,
        team_id=body.team_id,
        scope_kind=body.scope_kind,
        scope_team_id=body.scope_team_id,
        scope_selector=body.scope_selector,
    )
    response.headers["Location"] = f"/api/v1/role-bindings/{binding.id}"
    return RoleBindingOut.model_validate(binding)


@router.get("")
async def list_role_bindings(
    ctx: TenantCtx,
    user_id: UUID | None = None,
    team_id: UUID | None = None,
    after: UUID | None = None,
    limit: PageLimit = 100,
) -> Page[RoleBindingOut]:
    found = await bindings.list_role_bindings(
        ctx, user_id=user_id, team_id=team_id, after=after, limit=limit
    )
    return Page[RoleBindingOut].model_validate(page(found, limit, lambda b: b.id))


@router.get("/{binding_id}")
async def get_role_binding(ctx: TenantCtx, binding_id: UUID) -> RoleBindingOut:
    return RoleBindingOut.model_validate(await bindings.access_role_binding(ctx, binding_id))


@router.delete("/{binding_id}", status_code=204)
async def delete_role_binding(ctx: TenantCtx, binding_id: UUID) -> None:
    await bindings.delete_role_binding(ctx, binding_id)
