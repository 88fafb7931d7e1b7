"""Project pages: the list (and creating one), the overview, and members."""

from __future__ import annotations

import uuid
from typing import Any

from fastapi import APIRouter, Request
from starlette.responses import RedirectResponse, Response

from z4j.actions import members, projects
from z4j.actions.access import access_project
from z4j.actions.errors import Conflict, InvalidInput, NotFound, PermissionDenied
from z4j.api.v1.deps import require_ctx
from z4j.console.forms import field, signed_in_form
from z4j.console.render import render, render_fragment, wants_fragment
from z4j.domain.roles import Role

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


@router.get("/projects/{project_id}/members")
async def member_list(request: Request, project_id: uuid.UUID) -> Response:
    ctx = require_ctx(request)
    access = await access_project(ctx, project_id)
    return render(
        request,
        "members.html",
        project=access.project,
        access=access,
        section="members",
        roles=[r.value for r in Role],
        members=await members.list_members(ctx, project_id),
    )


@router.post("/projects/{project_id}/members")
async def member_add(request: Request, project_id: uuid.UUID) -> Response:
    ctx, form = await signed_in_form(request)
    try:
        await members.add_member(ctx, project_id, field(form, "email"), field(form, "role"))
    except (InvalidInput, Conflict, PermissionDenied, NotFound) as exc:
        if exc.code == "project.not_found":
            raise
        access = await access_project(ctx, project_id)
        return render(
            request,
            "members.html",
            status=exc.status,
            project=access.project,
            access=access,
            section="members",
            roles=[r.value for r in Role],
            members=await members.list_members(ctx, project_id),
            error=exc.detail or exc.title,
            email=field(form, "email"),
        )
    return RedirectResponse(f"/projects/{project_id}/members", status_code=303)
