"""The members page (invite, change a role, remove, revoke) and the invitation link's page."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import APIRouter, Request
from starlette.datastructures import FormData
from starlette.responses import RedirectResponse, Response

from z4j.actions import invitations, members, mfa, retention, sessions
from z4j.actions.access import access_project
from z4j.actions.context import Ctx
from z4j.actions.errors import (
    Conflict,
    InvalidInput,
    InvitationNotFound,
    MailFailed,
    NotFound,
    PermissionDenied,
)
from z4j.api.v1 import cookies
from z4j.api.v1.deps import brain_of, optional_ctx, require_ctx
from z4j.console.auth_pages import form_page
from z4j.console.forms import anonymous_form, field, signed_in_form, submit_project_form
from z4j.console.render import render
from z4j.domain.roles import Permission, Role

router = APIRouter(include_in_schema=False)

# What a form on the members page may fail with and show on the page again (a project the
# caller cannot see is an error page instead).
_SHOWN = (InvalidInput, Conflict, PermissionDenied, NotFound, MailFailed)


async def _page(
    request: Request, ctx: Ctx, project_id: uuid.UUID, status: int = 200, **context: Any
) -> Response:
    access = await access_project(ctx, project_id)
    pending = (
        await invitations.list_pending(ctx, project_id)
        if access.can(Permission.MEMBER_MANAGE)
        else []
    )
    return render(
        request,
        "members.html",
        status=status,
        project=access.project,
        access=access,
        section="members",
        roles=[r.value for r in Role],
        members=await members.list_members(ctx, project_id),
        invitations=pending,
        retention=await retention.read(ctx, project_id),
        **context,
    )


async def _submit(
    request: Request,
    project_id: uuid.UUID,
    action: Callable[[Ctx, FormData], Awaitable[str | None]],
) -> Response:
    """Run ``action(ctx, form)``; back to the page with a notice, or with the error shown."""
    return await submit_project_form(request, project_id, action, page=_page, shown=_SHOWN,
                                     kept=lambda form: {"email": field(form, "email")})  # fmt: skip


@router.get("/projects/{project_id}/members")
async def member_list(request: Request, project_id: uuid.UUID) -> Response:
    return await _page(request, require_ctx(request), project_id)


@router.post("/projects/{project_id}/members")
async def member_add(request: Request, project_id: uuid.UUID) -> Response:
    async def add(ctx: Ctx, form: Any) -> str:
        row = await members.add_member(ctx, project_id, field(form, "email"), field(form, "role"))
        return f"{row['email']} is now {row['role']}."

    return await _submit(request, project_id, add)


@router.post("/projects/{project_id}/invitations")
async def invite(request: Request, project_id: uuid.UUID) -> Response:
    async def send(ctx: Ctx, form: Any) -> str:
        sent = await invitations.invite(ctx, project_id, field(form, "email"), field(form, "role"))
        return f"Invitation sent to {sent.invitation['email']}; the link works once, for 72 hours."

    return await _submit(request, project_id, send)


@router.post("/projects/{project_id}/invitations/{invitation_id}/revoke")
async def revoke(request: Request, project_id: uuid.UUID, invitation_id: uuid.UUID) -> Response:
    async def drop(ctx: Ctx, _form: Any) -> str:
        await invitations.revoke(ctx, project_id, invitation_id)
        return "Invitation revoked: its link no longer works."

    return await _submit(request, project_id, drop)


@router.post("/projects/{project_id}/members/{user_id}/role")
async def change_role(request: Request, project_id: uuid.UUID, user_id: uuid.UUID) -> Response:
    async def change(ctx: Ctx, form: Any) -> str:
        row = await members.change_role(ctx, project_id, user_id, field(form, "role"))
        return f"{row['email']} is now {row['role']}."

    return await _submit(request, project_id, change)


@router.post("/projects/{project_id}/members/{user_id}/remove")
async def remove(request: Request, project_id: uuid.UUID, user_id: uuid.UUID) -> Response:
    async def drop(ctx: Ctx, _form: Any) -> str | None:
        await members.remove_member(ctx, project_id, user_id)
        return None if ctx.actor.id == user_id else "Member removed."

    return await _submit(request, project_id, drop)


@router.post("/projects/{project_id}/require-mfa")
async def require_mfa(request: Request, project_id: uuid.UUID) -> Response:
    async def switch(ctx: Ctx, form: Any) -> str:
        required = field(form, "required") == "1"
        await mfa.set_project_requirement(ctx, project_id, required)
        return "Two-factor sign-in is now required." if required else "No longer required."

    return await _submit(request, project_id, switch)


@router.post("/projects/{project_id}/retention")
async def change_retention(request: Request, project_id: uuid.UUID) -> Response:
    async def save(ctx: Ctx, form: Any) -> str:
        values: dict[str, object] = {"timezone": field(form, "timezone").strip()}
        keys = field(form, "redact_keys").replace(",", " ").split()
        values["redact_keys"] = keys
        for key in ("task_retention_days", "event_retention_days"):
            text = field(form, key).strip()
            values[key] = int(text) if text.isdigit() and len(text) <= 6 else text
        await retention.change(ctx, project_id, values)
        return "Retention saved."

    return await _submit(request, project_id, save)


@router.get("/invite/{token}")
async def invitation_page(request: Request, token: str) -> Response:
    ctx = optional_ctx(request)
    try:
        offer = await invitations.offer(ctx.brain, token)
    except InvitationNotFound as exc:
        return render(request, "error.html", status=404, error=exc, status_code=404)
    return form_page(request, "invite.html", token=token, offer=offer)


@router.post("/invite/{token}")
async def invitation_accept(request: Request, token: str) -> Response:
    ctx = optional_ctx(request)
    if ctx.user is not None:
        ctx, _form = await signed_in_form(request)
        project_id = await invitations.accept(ctx, token)
        return RedirectResponse(f"/projects/{project_id}", status_code=303)
    form = await anonymous_form(request)
    brain = brain_of(request)
    password = field(form, "password")
    try:
        if password != field(form, "password_again"):
            raise InvalidInput("The two passwords differ.", field="password_again")
        user, project_id = await invitations.accept_with_new_account(
            brain, token, password, field(form, "display_name") or None
        )
    except (InvalidInput, Conflict) as exc:
        offer = await invitations.offer(brain, token)
        return form_page(
            request,
            "invite.html",
            status=exc.status,
            token=token,
            offer=offer,
            error=exc.detail or exc.title,
        )
    source = request.client.host if request.client is not None else None
    signed = await sessions.login(brain, user.email, password, source)
    response = RedirectResponse(f"/projects/{project_id}", status_code=303)
    cookies.set_session(request, response, brain.settings, signed.cookie, signed.expires_at)
    return response
