"""The accounts page for brain administrators: who exists, disable and enable."""

from __future__ import annotations

import uuid
from typing import Any

from fastapi import APIRouter, Request
from starlette.responses import Response

from z4j.actions import accounts
from z4j.actions.context import Ctx
from z4j.actions.errors import Conflict, NotFound, PermissionDenied
from z4j.api.v1.deps import require_ctx
from z4j.console.forms import signed_in_form
from z4j.console.render import render

router = APIRouter(include_in_schema=False)


async def _page(request: Request, ctx: Ctx, status: int = 200, **context: Any) -> Response:
    users = await accounts.list_users(ctx)
    return render(request, "users.html", status=status, accounts=users, **context)


@router.get("/admin/users")
async def user_list(request: Request) -> Response:
    return await _page(request, require_ctx(request))


async def _switch(request: Request, user_id: uuid.UUID, active: bool) -> Response:
    ctx, _form = await signed_in_form(request)
    if not ctx.actor.is_admin:
        raise PermissionDenied("Only brain administrators manage accounts.")
    try:
        row = await accounts.set_active(ctx, user_id, active)
    except (Conflict, NotFound, PermissionDenied) as exc:
        return await _page(request, ctx, status=exc.status, error=exc.detail or exc.title)
    state = "enabled" if active else "disabled; their sessions and API keys stopped"
    return await _page(request, ctx, notice=f"{row['email']} is {state}.")


@router.post("/admin/users/{user_id}/disable")
async def disable(request: Request, user_id: uuid.UUID) -> Response:
    return await _switch(request, user_id, False)


@router.post("/admin/users/{user_id}/enable")
async def enable(request: Request, user_id: uuid.UUID) -> Response:
    return await _switch(request, user_id, True)
