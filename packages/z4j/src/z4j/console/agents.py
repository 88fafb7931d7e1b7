"""Agent pages: the list with liveness, creating one (secrets shown once), deleting."""

from __future__ import annotations

import uuid
from typing import Any

from fastapi import APIRouter, Request
from starlette.responses import RedirectResponse, Response

from z4j.actions import agents
from z4j.actions.errors import Conflict, InvalidInput
from z4j.api.v1.deps import public_url, require_ctx
from z4j.console.forms import field, signed_in_form
from z4j.console.projects import stream_url
from z4j.console.render import render, render_fragment, wants_fragment

router = APIRouter(include_in_schema=False)


async def _page(
    request: Request, project_id: uuid.UUID, status: int = 200, **extra: Any
) -> Response:
    ctx = require_ctx(request)
    access, rows = await agents.list_agents(ctx, project_id)
    context: dict[str, Any] = {"project": access.project, "access": access, "agents": rows, **extra}
    if wants_fragment(request):
        return render_fragment(request, "_agents_table.html", **context)
    return render(
        request,
        "agents.html",
        status=status,
        stream_url=stream_url(project_id),
        section="agents",
        **context,
    )


@router.get("/projects/{project_id}/agents")
async def agent_list(request: Request, project_id: uuid.UUID) -> Response:
    return await _page(request, project_id)


@router.post("/projects/{project_id}/agents")
async def agent_create(request: Request, project_id: uuid.UUID) -> Response:
    ctx, form = await signed_in_form(request)
    try:
        created = await agents.create_agent(
            ctx, project_id, field(form, "name"), public_url(request)
        )
    except (InvalidInput, Conflict) as exc:
        return await _page(
            request,
            project_id,
            status=exc.status,
            error=exc.detail or exc.title,
            name=field(form, "name"),
        )
    # Rendered in the POST's own response (never stored, never a redirect target): reloading
    # or going back cannot show the token again.
    return await _page(
        request, project_id, status=201, created=created, install_snippet=agents.INSTALL_SNIPPET
    )


@router.post("/projects/{project_id}/agents/{agent_id}/delete")
async def agent_delete(request: Request, project_id: uuid.UUID, agent_id: uuid.UUID) -> Response:
    ctx, _form = await signed_in_form(request)
    await agents.delete_agent(ctx, project_id, agent_id)
    return RedirectResponse(f"/projects/{project_id}/agents", status_code=303)
