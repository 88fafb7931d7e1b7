"""Members and invitations of a project, and accepting an invitation."""

from __future__ import annotations

import uuid

from fastapi import APIRouter, Request, Response, status

from z4j.actions import invitations, members, sessions
from z4j.actions.errors import AuthRequired
from z4j.api.v1 import cookies
from z4j.api.v1.deps import CtxDep, OptionalCtxDep, brain_of
from z4j.api.v1.schemas import (
    AcceptIn,
    AcceptOut,
    InvitationIn,
    InvitationOut,
    MemberIn,
    MemberOut,
    MemberRoleIn,
    OwnerIn,
)

router = APIRouter(tags=["members"])


@router.get("/projects/{project_id}/members", summary="Members and their roles")
async def list_members(project_id: uuid.UUID, ctx: CtxDep) -> list[MemberOut]:
    return [MemberOut.model_validate(m) for m in await members.list_members(ctx, project_id)]


@router.post(
    "/projects/{project_id}/members",
    status_code=status.HTTP_201_CREATED,
    summary="Give an existing account a role (brain administrators; others invite)",
)
async def add_member(project_id: uuid.UUID, body: MemberIn, ctx: CtxDep) -> MemberOut:
    row = await members.add_member(ctx, project_id, body.email, body.role.value)
    return MemberOut.model_validate(row)


@router.post(
    "/projects/{project_id}/owners",
    summary="Restore an owner: make an existing account an owner (brain administrators)",
)
async def restore_owner(project_id: uuid.UUID, body: OwnerIn, ctx: CtxDep) -> MemberOut:
    return MemberOut.model_validate(await members.restore_owner(ctx, project_id, body.email))


@router.patch(
    "/projects/{project_id}/members/{user_id}",
    summary="Change a member's role (within the caller's own; never the last owner's)",
)
async def change_role(
    project_id: uuid.UUID, user_id: uuid.UUID, body: MemberRoleIn, ctx: CtxDep
) -> MemberOut:
    row = await members.change_role(ctx, project_id, user_id, body.role.value)
    return MemberOut.model_validate(row)


@router.delete(
    "/projects/{project_id}/members/{user_id}",
    status_code=status.HTTP_204_NO_CONTENT,
    summary="Remove a member, or leave (never the last owner)",
)
async def remove_member(project_id: uuid.UUID, user_id: uuid.UUID, ctx: CtxDep) -> None:
    await members.remove_member(ctx, project_id, user_id)


@router.get("/projects/{project_id}/invitations", summary="Pending invitations (admins and owners)")
async def list_invitations(project_id: uuid.UUID, ctx: CtxDep) -> list[InvitationOut]:
    rows = await invitations.list_pending(ctx, project_id)
    return [InvitationOut.model_validate(r) for r in rows]


@router.post(
    "/projects/{project_id}/invitations",
    status_code=status.HTTP_201_CREATED,
    summary="Invite an email with a role; the link is mailed (valid 72 h, once)",
)
async def invite(project_id: uuid.UUID, body: InvitationIn, ctx: CtxDep) -> InvitationOut:
    sent = await invitations.invite(ctx, project_id, body.email, body.role.value)
    return InvitationOut.model_validate(sent.invitation)


@router.delete(
    "/projects/{project_id}/invitations/{invitation_id}",
    status_code=status.HTTP_204_NO_CONTENT,
    summary="Revoke a pending invitation",
)
async def revoke_invitation(project_id: uuid.UUID, invitation_id: uuid.UUID, ctx: CtxDep) -> None:
    await invitations.revoke(ctx, project_id, invitation_id)


@router.post(
    "/invitations/accept",
    summary="Accept an invitation: signed in as the invited email, or with a new password",
)
async def accept(
    body: AcceptIn, ctx: OptionalCtxDep, request: Request, response: Response
) -> AcceptOut:
    if ctx.user is not None:
        return AcceptOut(project_id=await invitations.accept(ctx, body.token))
    if body.password is None:
        raise AuthRequired("Sign in as the invited email, or give a password for a new account.")
    brain = brain_of(request)
    user, project_id = await invitations.accept_with_new_account(
        brain, body.token, body.password, body.display_name
    )
    source = request.client.host if request.client is not None else None
    signed = await sessions.login(brain, user.email, body.password, source)
    cookies.set_session(request, response, brain.settings, signed.cookie, signed.expires_at)
    return AcceptOut(project_id=project_id)
