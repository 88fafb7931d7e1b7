"""Permission-checked access to a project: the gate every project-scoped read and write uses.

A project that requires two-factor sign-in (``settings.require_mfa``) answers ``MfaRequired``
to a member who has not turned it on, whatever their role (``z4j.actions.mfa``).

A project the caller may not see answers ``ProjectNotFound`` exactly like a missing one, so an
id from another project reveals nothing. A visible project with too small a role answers
``PermissionDenied``. The check runs inside the project-scoped transaction that then does the
work, so row-level security backs it up with the same project id.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from platformkit.db.scope import Conn

from z4j.actions.context import Ctx
from z4j.actions.errors import InvalidInput, MfaRequired, PermissionDenied, ProjectNotFound
from z4j.domain.api_keys import acting_role
from z4j.domain.roles import Permission, Role, allows, effective_role
from z4j.store import mfa as mfa_store
from z4j.store import projects

MFA_REQUIRED = (
    "This project requires two-factor sign-in. Turn it on under Two-factor sign-in on your "
    "account page (/account), then open the project again."
)


@dataclass(frozen=True)
class ProjectAccess:
    project: dict[str, Any]
    role: Role

    @property
    def id(self) -> uuid.UUID:
        project_id: uuid.UUID = self.project["id"]
        return project_id

    def can(self, permission: Permission | str) -> bool:
        return allows(self.role, Permission(permission))


def role_named(value: str) -> Role:
    """The role a form or request names; an unknown one is a 422 on the ``role`` field."""
    try:
        return Role(value)
    except ValueError:
        raise InvalidInput("Unknown role.", field="role") from None


async def access_project_in(
    conn: Conn, ctx: Ctx, project_id: uuid.UUID, need: Permission = Permission.PROJECT_READ
) -> ProjectAccess:
    user = ctx.actor
    row = await projects.get_for_user(conn, project_id, user.id)
    membership = Role(row["role"]) if row is not None and row["role"] else None
    role = effective_role(membership, user.is_admin) if row is not None else None
    if ctx.key is not None:  # an API key: its project only, never above its owner's role now
        owner = effective_role(membership, ctx.key.owner_is_admin)
        same = project_id == ctx.key.project_id
        role = acting_role(Role(ctx.key.role), owner) if same and row is not None else None
    if row is None or role is None:
        raise ProjectNotFound(project_id=str(project_id))
    if not allows(role, need):
        raise PermissionDenied(f"The {role} role cannot do this ({need}).", permission=need)
    settings = row.get("settings") or {}
    if settings.get("require_mfa") is True and not await mfa_store.enabled(conn, user.id):
        raise MfaRequired(MFA_REQUIRED, enrol="/account")
    return ProjectAccess(row, role)


@asynccontextmanager
async def project_scope(
    ctx: Ctx, project_id: uuid.UUID, need: Permission = Permission.PROJECT_READ
) -> AsyncIterator[tuple[Conn, ProjectAccess]]:
    """A transaction scoped to ``project_id`` (RLS) that has passed the permission check."""
    async with ctx.brain.project_tx(project_id) as conn:
        access = await access_project_in(conn, ctx, project_id, need)
        yield conn, access


async def access_project(
    ctx: Ctx, project_id: uuid.UUID, need: Permission = Permission.PROJECT_READ
) -> ProjectAccess:
    async with project_scope(ctx, project_id, need) as (_conn, access):
        return access
