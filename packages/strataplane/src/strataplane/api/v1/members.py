"""Tenant members (tenant admins)."""

from __future__ import annotations

from datetime import datetime
from uuid import UUID

from fastapi import APIRouter, Depends, Response
from pydantic import Field

from strataplane import errors
from strataplane.actions import members
from strataplane.api.deps import TenantCtx, idempotency_key
from strataplane.api.v1.common import Model, Page, PageLimit, page

router = APIRouter(prefix="/members", tags=["members"])


class MemberIn(Model):
    """A new local user (``username`` and ``password``). An existing user is invited instead
    (``POST /api/v1/invitations``) and joins by accepting: a ``user_id`` here is refused with
    ``member.invitation_required``."""

    user_id: UUID | None = Field(None, description="Refused: invite an existing user.")
    username: str | None = None
    password: str | None = None
    display_name: str | None = None
    email: str | None = None


class MemberOut(Model):
    user_id: UUID
    source: str
    kind: str
    issuer: str
    subject: str
    display_name: str
    email: str | None
    created_at: datetime
    disabled_at: datetime | None


class MemberPatch(Model):
    disabled: bool


@router.post("", status_code=201, dependencies=[Depends(idempotency_key)])
async def add_member(ctx: TenantCtx, body: MemberIn, response: Response) -> MemberOut:
    if body.user_id is not None:
        raise errors.InvitationRequired(
            "invite the user (POST /api/v1/invitations); they join by accepting",
            field="user_id",
        )
    if not body.username or not body.password:
        raise errors.InvalidInput("give username and password", field="username")
    member = await members.add_member(
        ctx,
        username=body.username,
        password=body.password,
        display_name=body.display_name,
        email=body.email,
    )
    response.headers["Location"] = f"/api/v1/members/{member.user_id}"
    return MemberOut.model_validate(member)


@router.get("")
async def list_members(
    ctx: TenantCtx, after: UUID | None = None, limit: PageLimit = 100
) -> Page[MemberOut]:
    found = await members.list_members(ctx, after=after, limit=limit)
    return Page[MemberOut].model_validate(page(found, limit, lambda m: m.user_id))


@router.get("/{user_id}")
async def get_member(ctx: TenantCtx, user_id: UUID) -> MemberOut:
    return MemberOut.model_validate(await members.access_member(ctx, user_id))


@router.patch("/{user_id}")
async def patch_member(ctx: TenantCtx, user_id: UUID, body: MemberPatch) -> MemberOut:
    return MemberOut.model_validate(await members.set_member_disabled(ctx, user_id, body.disabled))


@router.delete("/{user_id}", status_code=204)
async def remove_member(ctx: TenantCtx, user_id: UUID) -> None:
    await members.remove_member(ctx, user_id)
