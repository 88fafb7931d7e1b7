"""Service accounts (tenant admins). Deleting one that has acted answers 409
service_account.in_use."""

from __future__ import annotations

from datetime import datetime
from uuid import UUID

from fastapi import APIRouter, Depends, Response
from pydantic import Field

from strataplane.actions import service_accounts
from strataplane.api.deps import TenantCtx, idempotency_key
from strataplane.api.v1.common import Model, Page, PageLimit, page

router = APIRouter(prefix="/service-accounts", tags=["service accounts"])


class ServiceAccountIn(Model):
    name: str = Field(min_length=1, max_length=200)
    description: str | None = None
    owner_team_id: UUID | None = None


class ServiceAccountPatch(Model):
    description: str | None = None
    owner_team_id: UUID | None = None


class ServiceAccountOut(Model):
    id: UUID
    name: str
    description: str | None
    owner_team_id: UUID | None
    created_by: UUID | None
    created_at: datetime


@router.post("", status_code=201, dependencies=[Depends(idempotency_key)])
async def create_service_account(
    ctx: TenantCtx, body: ServiceAccountIn, response: Response
) -> ServiceAccountOut:
    account = await service_accounts.create_service_account(
        ctx, body.name, description=body.description, owner_team_id=body.owner_team_id
    )
    response.headers["Location"] = f"/api/v1/service-accounts/{account.id}"
    return ServiceAccountOut.model_validate(account)


@router.get("")
async def list_service_accounts(
    ctx: TenantCtx, after: str | None = None, limit: PageLimit = 100
) -> Page[ServiceAccountOut]:
    found = await service_accounts.list_service_accounts(ctx, after=after, limit=limit)
    return Page[ServiceAccountOut].model_validate(page(found, limit, lambda a: a.name))


@router.get("/{account_id}")
async def get_service_account(ctx: TenantCtx, account_id: UUID) -> ServiceAccountOut:
    return ServiceAccountOut.model_validate(
        await service_accounts.access_service_account(ctx, account_id)
    )


@router.patch("/{account_id}")
async def update_service_account(
    ctx: TenantCtx, account_id: UUID, body: ServiceAccountPatch
) -> ServiceAccountOut:
    account = await service_accounts.update_service_account(
        ctx, account_id, description=body.description, owner_team_id=body.owner_team_id
    )
    return ServiceAccountOut.model_validate(account)


@router.delete("/{account_id}", status_code=204)
async def delete_service_account(ctx: TenantCtx, account_id: UUID) -> None:
    await service_accounts.delete_service_account(ctx, account_id)
