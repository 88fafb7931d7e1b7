"""Platform API (platform admins with a platform credential): tenants, users, platform tokens,
platform operations. Recorded in the platform audit chain."""

from __future__ import annotations

from datetime import datetime
from typing import Any
from uuid import UUID

from fastapi import APIRouter, Depends, Response
from platformkit.http import no_idempotency_key
from pydantic import Field

from strataplane.actions import tenant_admins, tenants, tokens, users
from strataplane.api.deps import PlatformCtx, platform_idempotency_key
from strataplane.api.v1.common import Model, OperationOut, Page, PageLimit, page
from strataplane.api.v1.tokens import CreatedTokenOut, TokenIn, TokenOut

router = APIRouter(prefix="/platform", tags=["platform"])


class TenantIn(Model):
    slug: str
    display_name: str
    limits: dict[str, Any] = Field(default_factory=dict)
    admin_user_id: UUID | None = None


class TenantOut(Model):
    id: UUID
    slug: str
    display_name: str
    state: str
    shard: int
    limits: dict[str, Any]
    created_at: datetime
    state_since: datetime


class UserIn(Model):
    username: str
    display_name: str
    password: str
    email: str | None = None
    platform_admin: bool = False


class UserOut(Model):
    id: UUID
    kind: str
    issuer: str
    subject: str
    email: str | None
    display_name: str
    platform_admin: bool
    created_at: datetime
    last_login_at: datetime | None
    disabled_at: datetime | None


class UserPatch(Model):
    disabled: bool


@router.post("/tenants", status_code=201, dependencies=[Depends(platform_idempotency_key)])
async def create_tenant(ctx: PlatformCtx, body: TenantIn, response: Response) -> TenantOut:
    tenant = await tenants.create_tenant(
        ctx, body.slug, body.display_name, limits=body.limits, admin_user_id=body.admin_user_id
    )
    response.headers["Location"] = f"/api/v1/platform/tenants/{tenant.id}"
    return TenantOut.model_validate(tenant)


@router.get("/tenants")
async def list_tenants(
    ctx: PlatformCtx, after: str | None = None, limit: PageLimit = 100
) -> Page[TenantOut]:
    found = await tenants.list_tenants(ctx, after=after, limit=limit)
    return Page[TenantOut].model_validate(page(found, limit, lambda t: t.slug))


@router.get("/tenants/{tenant_id}")
async def get_tenant(ctx: PlatformCtx, tenant_id: UUID) -> TenantOut:
    return TenantOut.model_validate(await tenants.access_tenant(ctx, tenant_id))


@router.post("/tenants/{tenant_id}/suspend")
async def suspend_tenant(ctx: PlatformCtx, tenant_id: UUID) -> TenantOut:
    return TenantOut.model_validate(await tenants.suspend_tenant(ctx, tenant_id))


@router.post("/tenants/{tenant_id}/resume")
async def resume_tenant(ctx: PlatformCtx, tenant_id: UUID) -> TenantOut:
    return TenantOut.model_validate(await tenants.resume_tenant(ctx, tenant_id))


@router.delete("/tenants/{tenant_id}", status_code=202)
async def delete_tenant(ctx: PlatformCtx, tenant_id: UUID, response: Response) -> OperationOut:
    op = await tenants.delete_tenant(ctx, tenant_id)
    response.headers["Location"] = f"/api/v1/platform/operations/{op.id}"
    return OperationOut.model_validate(op)


class AdminRestoreIn(Model):
    user_id: UUID = Field(description="A human user; made an enabled member holding admin.")


class AdminRestoreOut(Model):
    tenant_id: UUID
    user_id: UUID
    changed: bool = Field(description="False when the user already was an enabled admin.")


@router.post("/tenants/{tenant_id}/admins")
async def restore_tenant_admin(
    ctx: PlatformCtx, tenant_id: UUID, body: AdminRestoreIn
) -> AdminRestoreOut:
    """Make a user an admin of the tenant again (audited in both chains)."""
    changed = await tenant_admins.restore_tenant_admin(ctx, tenant_id, body.user_id)
    return AdminRestoreOut(tenant_id=tenant_id, user_id=body.user_id, changed=changed)


@router.get("/operations/{operation_id}")
async def get_operation(ctx: PlatformCtx, operation_id: UUID) -> OperationOut:
    return OperationOut.model_validate(await tenants.access_platform_operation(ctx, operation_id))


@router.post("/users", status_code=201, dependencies=[Depends(platform_idempotency_key)])
async def create_user(ctx: PlatformCtx, body: UserIn) -> UserOut:
    user = await users.create_user(
        ctx,
        body.username,
        body.display_name,
        body.password,
        email=body.email,
        platform_admin=body.platform_admin,
    )
    return UserOut.model_validate(user)


@router.get("/users")
async def list_users(
    ctx: PlatformCtx, after: UUID | None = None, limit: PageLimit = 100
) -> Page[UserOut]:
    found = await users.list_users(ctx, after=after, limit=limit)
    return Page[UserOut].model_validate(page(found, limit, lambda u: u.id))


@router.get("/users/{user_id}")
async def get_user(ctx: PlatformCtx, user_id: UUID) -> UserOut:
    return UserOut.model_validate(await users.access_user(ctx, user_id))


@router.patch("/users/{user_id}")
async def patch_user(ctx: PlatformCtx, user_id: UUID, body: UserPatch) -> UserOut:
    return UserOut.model_validate(await users.set_user_disabled(ctx, user_id, body.disabled))


@router.post("/tokens", status_code=201, dependencies=[Depends(no_idempotency_key)])
async def create_platform_token(ctx: PlatformCtx, body: TokenIn) -> CreatedTokenOut:
    created = await tokens.create_platform_token(ctx, body.name, expires_at=body.expires_at)
    return CreatedTokenOut.of(created)


@router.get("/tokens")
async def list_platform_tokens(ctx: PlatformCtx) -> list[TokenOut]:
    return [TokenOut.model_validate(t) for t in await tokens.list_platform_tokens(ctx)]


@router.delete("/tokens/{token_id}")
async def revoke_platform_token(ctx: PlatformCtx, token_id: UUID) -> TokenOut:
    return TokenOut.model_validate(await tokens.revoke_platform_token(ctx, token_id))
