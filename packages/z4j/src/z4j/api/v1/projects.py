"""Projects, their members, and user accounts (brain administrators)."""

from __future__ import annotations

import uuid

from fastapi import APIRouter, status

from z4j.actions import members, projects, users
from z4j.api.v1.deps import CtxDep
from z4j.api.v1.schemas import (
    MemberIn,
    MemberOut,
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


@router.get("/projects/{project_id}/members", summary="Members and their roles")
async def list_members(project_id: uuid.UUID, ctx: CtxDep) -> list[MemberOut]:
    return [MemberOut.model_validate(m) for m in await members.list_members(ctx, project_id)]


@router.post(
    "/projects/{project_id}/members",
    status_code=status.HTTP_201_CREATED,
    summary="Give an existing user a role in the project (admins and owners)",
)
async def add_member(project_id: uuid.UUID, body: MemberIn, ctx: CtxDep) -> MemberOut:
    row = await members.add_member(ctx, project_id, body.email, body.role.value)
    return MemberOut.model_validate(row)


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
