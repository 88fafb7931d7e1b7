"""Invitations: tenant admins invite existing users (``/invitations``); a user answers their
own (``/me/invitations``) with any credential of theirs, bound to a tenant or not."""

from __future__ import annotations

from datetime import datetime
from uuid import UUID

from fastapi import APIRouter, Depends, Request, Response
from pydantic import Field

from strataplane.actions import invitations
from strataplane.api.deps import CurrentPrincipal, TenantCtx, idempotency_key, request_meta
from strataplane.api.v1.common import Model, Page, PageLimit, page

router = APIRouter(tags=["members"])


class InvitationIn(Model):
    user_id: UUID = Field(description="An existing human user of the installation.")


class InvitationOut(Model):
    """What the tenant sees of an invitation: no name or address of the invited user."""

    id: UUID
    user_id: UUID
    created_by: UUID | None
    created_at: datetime
    expires_at: datetime


class ReceivedInvitationOut(InvitationOut):
    tenant_id: UUID
    tenant_slug: str
    tenant_display_name: str


class AnsweredOut(Model):
    tenant_id: UUID
    accepted: bool


@router.post("/invitations", status_code=201, dependencies=[Depends(idempotency_key)])
async def invite_member(ctx: TenantCtx, body: InvitationIn, response: Response) -> InvitationOut:
    invitation = await invitations.invite_member(ctx, body.user_id)
    response.headers["Location"] = f"/api/v1/invitations/{invitation.id}"
    return InvitationOut.model_validate(invitation)


@router.get("/invitations")
async def list_invitations(
    ctx: TenantCtx, after: UUID | None = None, limit: PageLimit = 100
) -> Page[InvitationOut]:
    found = await invitations.list_invitations(ctx, after=after, limit=limit)
    return Page[InvitationOut].model_validate(page(found, limit, lambda i: i.id))


@router.delete("/invitations/{invitation_id}", status_code=204)
async def revoke_invitation(ctx: TenantCtx, invitation_id: UUID) -> None:
    await invitations.revoke_invitation(ctx, invitation_id)


@router.get("/me/invitations")
async def received_invitations(
    request: Request, principal: CurrentPrincipal
) -> list[ReceivedInvitationOut]:
    found = await invitations.received_invitations(request_meta(request), principal)
    return [ReceivedInvitationOut.model_validate(i) for i in found]


async def _answer(
    request: Request, principal: CurrentPrincipal, invitation_id: UUID, accept: bool
) -> AnsweredOut:
    tenant_id = await invitations.answer_invitation(
        request_meta(request), principal, invitation_id, accept=accept
    )
    return AnsweredOut(tenant_id=tenant_id, accepted=accept)


@router.post("/me/invitations/{invitation_id}/accept")
async def accept_invitation(
    request: Request, principal: CurrentPrincipal, invitation_id: UUID
) -> AnsweredOut:
    """Become a member of the inviting tenant (with no role until an admin binds one)."""
    return await _answer(request, principal, invitation_id, True)


@router.post("/me/invitations/{invitation_id}/decline")
async def decline_invitation(
    request: Request, principal: CurrentPrincipal, invitation_id: UUID
) -> AnsweredOut:
    return await _answer(request, principal, invitation_id, False)
