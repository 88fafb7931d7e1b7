"""Teams: the model resource (docs/strataplane/architecture.md §1.3)."""

from __future__ import annotations

from datetime import datetime
from uuid import UUID

from fastapi import APIRouter, Depends, Response
from pydantic import Field

from strataplane.actions import teams
from strataplane.api.deps import TenantCtx, idempotency_key
from strataplane.api.v1.common import Model, Page, PageLimit, page

router = APIRouter(prefix="/teams", tags=["teams"])


class TeamIn(Model):
    slug: str
    display_name: str = Field(min_length=1, max_length=200)
    external_id: str | None = Field(
        default=None,
        min_length=1,
        max_length=256,
        description="An OIDC group: the team is then an oidc team, whose members are the "
        "people whose groups claim holds this value at their sign-in.",
    )


class TeamPatch(Model):
    display_name: str = Field(min_length=1, max_length=200)


class TeamOut(Model):
    id: UUID
    slug: str
    display_name: str
    source: str
    external_id: str | None
    created_at: datetime


class TeamMemberIn(Model):
    user_id: UUID


class TeamMemberOut(Model):
    user_id: UUID
    display_name: str
    kind: str
    synced_at: datetime


@router.post("", status_code=201, dependencies=[Depends(idempotency_key)])
async def create_team(ctx: TenantCtx, body: TeamIn, response: Response) -> TeamOut:
    team = await teams.create_team(ctx, body.slug, body.display_name, external_id=body.external_id)
    response.headers["Location"] = f"/api/v1/teams/{team.id}"
    return TeamOut.model_validate(team)


@router.get("")
async def list_teams(
    ctx: TenantCtx, after: str | None = None, limit: PageLimit = 100
) -> Page[TeamOut]:
    found = await teams.list_teams(ctx, after=after, limit=limit)
    return Page[TeamOut].model_validate(page(found, limit, lambda t: t.slug))


@router.get("/{team_id}")
async def get_team(ctx: TenantCtx, team_id: UUID) -> TeamOut:
    return TeamOut.model_validate(await teams.access_team(ctx, team_id))


@router.patch("/{team_id}")
async def update_team(ctx: TenantCtx, team_id: UUID, body: TeamPatch) -> TeamOut:
    return TeamOut.model_validate(
        await teams.update_team(ctx, team_id, display_name=body.display_name)
    )


@router.delete("/{team_id}", status_code=204)
async def delete_team(ctx: TenantCtx, team_id: UUID) -> None:
    await teams.delete_team(ctx, team_id)


@router.get("/{team_id}/members")
async def list_team_members(ctx: TenantCtx, team_id: UUID) -> list[TeamMemberOut]:
    return [TeamMemberOut.model_validate(m) for m in await teams.list_team_members(ctx, team_id)]


@router.post("/{team_id}/members", status_code=204, dependencies=[Depends(idempotency_key)])
async def add_team_member(ctx: TenantCtx, team_id: UUID, body: TeamMemberIn) -> None:
    await teams.add_team_member(ctx, team_id, body.user_id)


@router.delete("/{team_id}/members/{user_id}", status_code=204)
async def remove_team_member(ctx: TenantCtx, team_id: UUID, user_id: UUID) -> None:
    await teams.remove_team_member(ctx, team_id, user_id)
