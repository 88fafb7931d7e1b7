"""Invitations over the API (04-API-SPEC §10.3): a tenant owner or admin invites an e-mail
address to the tenant and a workspace with a role, lists and withdraws pending invitations;
the invitee accepts with the one-time token of the mail, which is the only credential that
route takes. The mail goes by SMTP when ``AGENTBUS_SMTP_HOST`` is set, else into the outbox
folder (``<config dir>/outbox``)."""

from __future__ import annotations

import logging
from typing import Any, Literal

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response
from platformkit.mail import MailError
from pydantic import Field

from agentbus.actions import invitations
from agentbus.gateway.actions.administration import _id
from agentbus.gateway.api.admin import Caller
from agentbus.gateway.api.bodies import Body, read_model
from agentbus.gateway.api.views import ts
from agentbus.gateway.context import get_gateway
from agentbus.ids import format_id

log = logging.getLogger(__name__)
router = APIRouter(tags=["invitations"])


class NewInvitation(Body):
    email: str = Field(min_length=3, max_length=320)
    workspace: str | None = None
    role: Literal["admin", "member", "viewer"] = "member"


class Acceptance(Body):
    token: str = Field(min_length=1, max_length=invitations.TOKEN_MAX)
    display_name: str | None = Field(None, max_length=200)


def invitation_view(row: dict[str, Any]) -> dict[str, Any]:
    ws = row["workspace_id"]
    return {
        "id": format_id("inv", row["id"]),
        "email": row["email"],
        "workspace_id": None if ws is None else format_id("ws", ws),
        "role": row["role"],
        "invited_by": format_id("usr", row["invited_by"]),
        "expires_at": ts(row["expires_at"]),
        "created_at": ts(row["created_at"]),
    }


@router.post("/v1/invitations", status_code=201)
async def post_invitation(request: Request, who: Caller) -> dict[str, Any]:
    """Invite ``email`` (to ``workspace`` with ``role``); the one-time link is mailed, never
    answered. ``mailed`` is false when the mail could not be handed on (the invitation stands;
    withdraw it and invite again)."""
    body = await read_model(request, NewInvitation)
    ws = None if body.workspace is None else _id("ws", body.workspace, "workspace")
    gw = get_gateway(request)
    invited = await invitations.invite(who.ctx, who.tenant_id, email=body.email,
                                       workspace_id=ws, role=body.role)  # fmt: skip
    mailed = True
    try:
        await invitations.send_invitation(gw.mailer, invited, gw.settings.base_url)
    except MailError as exc:
        log.warning("invitation %s not mailed: %s", invited.row["id"], exc)
        mailed = False
    return {**invitation_view(invited.row), "mailed": mailed}


@router.get("/v1/invitations")
async def get_invitations(who: Caller) -> dict[str, Any]:
    """Pending invitations, newest first (expired ones too, until withdrawn)."""
    rows = await invitations.list_pending(who.ctx, who.tenant_id)
    return {"items": [invitation_view(r) for r in rows]}


@router.delete("/v1/invitations/{invitation_id}", status_code=204)
async def delete_invitation(invitation_id: str, who: Caller) -> Response:
    """Withdraw a pending invitation; its link stops working."""
    await invitations.revoke(who.ctx, who.tenant_id, _id("inv", invitation_id, "invitation"))
    return Response(status_code=204)


@router.post("/v1/invitations/accept")
async def post_acceptance(request: Request) -> JSONResponse:
    """Accept with the mailed token (no other credential): the new user, its workspace role,
    and for a workspace invitation an integration token bound to it, shown once."""
    body = await read_model(request, Acceptance)
    done = await invitations.accept(get_gateway(request).pool, body.token,
                                    display_name=body.display_name)  # fmt: skip
    answer: dict[str, Any] = {
        "user": {"id": format_id("usr", done.user["id"]), "email": done.user["email"],
                 "tenant_id": format_id("ten", done.user["tenant_id"]), "tenant_role": "member"},
        "workspace_id": None if done.workspace_id is None else format_id("ws", done.workspace_id),
        "role": done.role,
        "token": None if done.token is None else {
            "id": format_id("tok", done.token.row["id"]), "token": done.token.plaintext},
    }  # fmt: skip
    return JSONResponse(answer, headers={"Cache-Control": "no-store"})
