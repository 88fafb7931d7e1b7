"""Projects: creating them (brain admins), listing what a user sees, and the overview."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from platformkit.db.scope import transaction

from z4j.actions import audit
from z4j.actions.access import ProjectAccess, project_scope
from z4j.actions.context import Ctx
from z4j.actions.errors import InvalidInput, PermissionDenied, ProjectNameTaken
from z4j.domain.api_keys import acting_role
from z4j.domain.roles import Role, can_create_project, effective_role
from z4j.store import agents as agent_store
from z4j.store import memberships, projects, tasks_read

OVERVIEW_WINDOW = timedelta(hours=24)


def _clean_name(name: str) -> str:
    name = " ".join(name.split())
    if not 1 <= len(name) <= 200:
        raise InvalidInput("A project name has 1 to 200 characters.", field="name")
    return name


async def create_project(ctx: Ctx, name: str) -> dict[str, Any]:
    """A brain admin creates a project and becomes its owner."""
    user = ctx.actor
    if not can_create_project(user.is_admin):
        raise PermissionDenied("Only brain administrators create projects.")
    name = _clean_name(name)
    async with transaction(ctx.brain.pool) as conn:
        row = await projects.create(conn, name)
        if row is None:
            raise ProjectNameTaken(name=name)
        await memberships.add(conn, user.id, row["id"], Role.OWNER.value)
        await audit.record(
            conn,
            ctx.brain,
            "project.create",
            actor=user.id,
            project_id=row["id"],
            target_type="project",
            target_id=row["id"],
            details={"name": name},
        )
    return {**row, "role": Role.OWNER.value}


async def list_projects(ctx: Ctx) -> list[dict[str, Any]]:
    """Each visible project with ``role``: the role the caller acts with there."""
    user, key = ctx.actor, ctx.key
    every = user.is_admin or (key is not None and key.owner_is_admin)
    async with transaction(ctx.brain.pool) as conn:
        rows = await projects.list_for_user(conn, user.id, all_projects=every)
    out = []
    for row in rows:
        membership = Role(row["role"]) if row["role"] else None
        role = effective_role(membership, user.is_admin)
        if key is not None:  # an API key sees its own project, at its capped role
            if row["id"] != key.project_id:
                continue
            role = acting_role(Role(key.role), effective_role(membership, key.owner_is_admin))
        out.append({**row, "role": role.value if role else None})
    return out


@dataclass(frozen=True)
class Overview:
    access: ProjectAccess
    counts: dict[str, int]
    since: datetime
    agents: list[dict[str, Any]]

    @property
    def agents_online(self) -> int:
        return sum(1 for a in self.agents if a["state"] == "online")


async def project_overview(ctx: Ctx, project_id: uuid.UUID) -> Overview:
    since = datetime.now(UTC) - OVERVIEW_WINDOW
    async with project_scope(ctx, project_id) as (conn, access):
        counts = await tasks_read.counts_by_state(conn, project_id, since)
        agents = await agent_store.list_for_project(conn, project_id)
    return Overview(access, counts, since, agents)
