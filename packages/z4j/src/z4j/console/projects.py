"""Project pages: the list (and creating one) and the overview."""

from __future__ import annotations

import uuid
from typing import Any

from fastapi import APIRouter, Request
from starlette.responses import RedirectResponse, Response

from z4j.actions import projects
from z4j.actions.errors import Conflict, InvalidInput
from z4j.api.v1.deps import require_ctx
from z4j.console.forms import field, signed_in_form
from z4j.console.render import render, render_fragment, wants_fragment

router = APIRouter(include_in_schema=False)


def stream_url(project_id: uuid.UUID) -> str:
    return f"/api/v1/projects/{project_id}/events/stream"


@router.get("/projects")
async def project_list(request: Request) -> Response:
    ctx = require_ctx(request)
    return render(request, "projects.html", projects=await projects.list_projects(ctx))


@router.post("/projects")
async def project_create(request: Request) -> Response:
    ctx, form = await signed_in_form(request)
    try:
        project = await projects.create_project(ctx, field(form, "name"))
    except (InvalidInput, Conflict) as exc:
        return render(
            request,
            "projects.html",
            status=exc.status,
            projects=await projects.list_projects(ctx),
            error=exc.detail or exc.title,
            name=field(form, "name"),
        )
    return RedirectResponse(f"/projects/{project['id']}", status_code=303)


@router.get("/projects/{project_id}")
async def overview(request: Request, project_id: uuid.UUID) -> Response:
    ctx = require_ctx(request)
    view = await projects.project_overview(ctx, project_id)
    context: dict[str, Any] = {"project": view.access.project, "access": view.access, "view": view}
    if wants_fragment(request):
        return render_fragment(request, "_overview.html", **context)
    return render(
        request, "overview.html", stream_url=stream_url(project_id), section="overview", **context
    )
