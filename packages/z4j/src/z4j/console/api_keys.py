"""The API keys page: create one for a project (its token shown once), list, revoke."""

from __future__ import annotations

import uuid
from typing import Any

from fastapi import APIRouter, Request
from starlette.responses import Response

from z4j.actions import api_keys, projects
from z4j.actions.context import Ctx
from z4j.actions.errors import InvalidInput, NotFound, PermissionDenied
from z4j.api.v1.deps import require_ctx
from z4j.console.forms import field, signed_in_form
from z4j.console.render import render
from z4j.domain.roles import Role

router = APIRouter(include_in_schema=False)


async def _page(request: Request, ctx: Ctx, status: int = 200, **context: Any) -> Response:
    return render(
        request,
        "api_keys.html",
        status=status,
        keys=await api_keys.list_keys(ctx),
        projects=await projects.list_projects(ctx),
        roles=[r.value for r in Role],
        **context,
    )


@router.get("/account/api-keys")
async def key_list(request: Request) -> Response:
    return await _page(request, require_ctx(request))


@router.post("/account/api-keys")
async def key_create(request: Request) -> Response:
    ctx, form = await signed_in_form(request)
    try:
        try:
            project_id = uuid.UUID(field(form, "project_id"))
        except ValueError:
            raise InvalidInput("Choose a project.", field="project_id") from None
        created = await api_keys.create_key(
            ctx, project_id, field(form, "name"), field(form, "role")
        )
    except (InvalidInput, PermissionDenied, NotFound) as exc:
        return await _page(request, ctx, status=exc.status, error=exc.detail or exc.title)
    return await _page(request, ctx, created=created)


@router.post("/account/api-keys/{key_id}/revoke")
async def key_revoke(request: Request, key_id: uuid.UUID) -> Response:
    ctx, _form = await signed_in_form(request)
    try:
        await api_keys.revoke_key(ctx, key_id)
    except NotFound as exc:
        return await _page(request, ctx, status=exc.status, error=exc.detail or exc.title)
    return await _page(request, ctx, notice="Key revoked; it stopped working.")
