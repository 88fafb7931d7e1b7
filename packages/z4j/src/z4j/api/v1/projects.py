"""Projects and user accounts (brain administrators); members are in ``members``."""

from __future__ import annotations

import uuid

from fastapi import APIRouter, status

from z4j.actions import projects, users
from z4j.api.v1.deps import CtxDep
from z4j.api.v1.schemas import (
    ProjectDetail,
    ProjectIn,
    ProjectOut,
    UserIn,
    UserOut,
)

router = APIRouter(tags=["projects"])


@router.get("/projects", summary="Projects the caller can see")
async def list_projects(ctx: CtxDep) -> list[ProjectOut]:
    return [ProjectOut.model_validate(row) for row in await projects.list_projects(ctx)]


@router.post(
    "/projects",
    status_code=status.HTTP_201_CREATED,
    summary="Create a project (brain administrators); the caller becomes its owner",
)
async def create_project(body: ProjectIn, ctx: CtxDep) -> ProjectOut:
    return ProjectOut.model_validate(await projects.create_project(ctx, body.name))


@router.get("/projects/{project_id}", summary="A project with task counts and agent liveness")
async def get_project(project_id: uuid.UUID, ctx: CtxDep) -> ProjectDetail:
    overview = await projects.project_overview(ctx, project_id)
    return ProjectDetail.model_validate(
        {
            **overview.access.project,
            "role": overview.access.role,
            "task_counts_24h": overview.counts,
            "agents_online": overview.agents_online,
            "agents_total": len(overview.agents),
        }
    )


@router.post(
    "/users",
    status_code=status.HTTP_201_CREATED,
    summary="Create a user account (brain administrators)",
    tags=["users"],
)
async def create_user(body: UserIn, ctx: CtxDep) -> UserOut:
    user = await users.create_user(
        ctx, body.email, body.password, is_admin=body.is_admin, display_name=body.display_name
    )
    return UserOut.model_validate(user)
