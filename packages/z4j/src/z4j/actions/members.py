"""Project members: listing them and granting roles (admins grant up to their own role)."""

from __future__ import annotations

import uuid
from typing import Any

from z4j.actions import audit
from z4j.actions.access import project_scope
from z4j.actions.context import Ctx
from z4j.actions.errors import AlreadyMember, InvalidInput, PermissionDenied, UserNotFound
from z4j.domain.roles import Permission, Role, can_grant
from z4j.store import memberships
from z4j.store import users as user_store


async def list_members(ctx: Ctx, project_id: uuid.UUID) -> list[dict[str, Any]]:
    async with project_scope(ctx, project_id) as (conn, _access):
        return await memberships.list_for_project(conn, project_id)


async def add_member(ctx: Ctx, project_id: uuid.UUID, email: str, role: str) -> dict[str, Any]:
    try:
        granted = Role(role)
    except ValueError:
        raise InvalidInput("Unknown role.", field="role") from None
    async with project_scope(ctx, project_id, Permission.MEMBER_MANAGE) as (conn, access):
        if not can_grant(access.role, granted):
            raise PermissionDenied(f"The {access.role} role cannot grant {granted}.")
        user = await user_store.get_by_email(conn, email)
        if user is None:
            raise UserNotFound("No user has this email; a brain admin creates accounts.")
        row = await memberships.add(conn, user["id"], project_id, granted.value)
        if row is None:
            raise AlreadyMember(email=user["email"])
        await audit.record(
            conn,
            ctx.brain,
            "member.add",
            actor=ctx.actor_id,
            project_id=project_id,
            target_type="user",
            target_id=user["id"],
            details={"email": user["email"], "role": granted.value},
        )
    return {**row, "email": user["email"], "display_name": user["display_name"]}
