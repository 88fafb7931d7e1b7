"""Teams: the model resource. Local teams are managed here by tenant admins; a team that
scopes a role binding cannot be deleted (409 team.in_use)."""

from __future__ import annotations

import re
from uuid import UUID

import psycopg
from platformkit.ids import uuid7

from strataplane import errors
from strataplane.actions.access import TenantTx, tenant_tx
from strataplane.actions.context import Ctx
from strataplane.store import members, teams
from strataplane.store.teams import Team, TeamMember

SLUG = re.compile(r"^[a-z0-9][a-z0-9-]{0,62}$")


def check_slug(slug: str) -> None:
    """The table's CHECK, checked first so the caller gets a precise error."""
    if not SLUG.fullmatch(slug):
        raise errors.InvalidSlug(
            "1 to 63 characters: a-z, 0-9 and '-', starting with a letter or digit", field="slug"
        )


async def _team(tx: TenantTx, team_id: UUID) -> Team:
    team = await teams.get_team(tx.conn, tx.tenant_id, team_id)
    if team is None:
        raise errors.TeamNotFound()
    return team


async def create_team(
    ctx: Ctx, slug: str, display_name: str, *, external_id: str | None = None
) -> Team:
    """A local team, or with ``external_id`` (an OIDC group) an oidc team, whose members are
    the people signing in with that group (docs/strataplane/sign-in.md)."""
    check_slug(slug)
    async with tenant_tx(ctx) as tx:
        tx.require("tenant.admin")
        try:
            team = await teams.insert_team(
                tx.conn, tx.tenant_id, uuid7(), slug, display_name, external_id
            )
        except psycopg.errors.UniqueViolation:
            raise errors.TeamSlugTaken(field="slug") from None
        details = {"slug": slug, "source": team.source}
        if external_id is not None:
            details["external_id"] = external_id
        await tx.audit("team.create", "team", team.id, details)
    return team


async def list_teams(ctx: Ctx, *, after: str | None = None, limit: int = 100) -> list[Team]:
    async with tenant_tx(ctx) as tx:
        tx.require("spec.read")
        return await teams.list_teams(tx.conn, tx.tenant_id, after=after, limit=limit)


async def access_team(ctx: Ctx, team_id: UUID) -> Team:
    async with tenant_tx(ctx) as tx:
        tx.require("spec.read")
        return await _team(tx, team_id)


async def update_team(ctx: Ctx, team_id: UUID, *, display_name: str) -> Team:
    async with tenant_tx(ctx) as tx:
        tx.require("tenant.admin")
        team = await teams.update_team(tx.conn, tx.tenant_id, team_id, display_name=display_name)
        if team is None:
            raise errors.TeamNotFound()
        await tx.audit("team.update", "team", team_id, {"display_name": display_name})
    return team


async def delete_team(ctx: Ctx, team_id: UUID) -> None:
    async with tenant_tx(ctx) as tx:
        tx.require("tenant.admin")
        team = await _team(tx, team_id)
        if await teams.team_scopes_a_binding(tx.conn, tx.tenant_id, team_id):
            raise errors.TeamInUse("remove the role bindings scoped to this team first")
        async with tx.keeping_an_admin():
            await teams.delete_team(tx.conn, tx.tenant_id, team_id)
        await tx.audit("team.delete", "team", team_id, {"slug": team.slug})


async def add_team_member(ctx: Ctx, team_id: UUID, user_id: UUID) -> None:
    """Service accounts are never team members: they are bound directly."""
    async with tenant_tx(ctx) as tx:
        tx.require("tenant.admin")
        await _team(tx, team_id)
        member = await members.get_member(tx.conn, tx.tenant_id, user_id)
        if member is None:
            raise errors.MemberNotFound(field="user_id")
        if member.kind != "human":
            raise errors.NotHuman("service accounts are bound directly", field="user_id")
        try:
            await teams.add_team_member(tx.conn, tx.tenant_id, team_id, user_id)
        except psycopg.errors.UniqueViolation:
            raise errors.AlreadyTeamMember() from None
        await tx.audit("team_member.add", "team", team_id, {"user_id": str(user_id)})


async def remove_team_member(ctx: Ctx, team_id: UUID, user_id: UUID) -> None:
    async with tenant_tx(ctx) as tx:
        tx.require("tenant.admin")
        await _team(tx, team_id)
        async with tx.keeping_an_admin():
            if not await teams.remove_team_member(tx.conn, tx.tenant_id, team_id, user_id):
                raise errors.TeamMemberNotFound()
        await tx.audit("team_member.remove", "team", team_id, {"user_id": str(user_id)})


async def list_team_members(ctx: Ctx, team_id: UUID) -> list[TeamMember]:
    async with tenant_tx(ctx) as tx:
        tx.require("spec.read")
        await _team(tx, team_id)
        return await teams.list_team_members(tx.conn, tx.tenant_id, team_id)
