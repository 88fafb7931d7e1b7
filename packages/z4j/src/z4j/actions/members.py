"""Project members: listing them, changing a member's role, and removing one.

People join through invitations (``z4j.actions.invitations``); a brain administrator may add an
existing account directly, and restore an owner to a project whose owners are locked out. The
rules of who may change whom are ``z4j.domain.membership``'s; the owners' rows are locked while
a change is checked, so a project never loses its last owner to two concurrent changes.
"""

from __future__ import annotations

import uuid
from typing import Any

from z4j.actions import audit
from z4j.actions.access import project_scope, role_named
from z4j.actions.context import Ctx
from z4j.actions.errors import (
    AlreadyMember,
    LastOwner,
    MemberNotFound,
    PermissionDenied,
    UserNotFound,
)
from z4j.domain.membership import Refusal, RefusalKind, removal_refusal, role_change_refusal
from z4j.domain.roles import Permission, Role, can_grant
from z4j.store import memberships
from z4j.store import users as user_store


def _raise(refusal: Refusal) -> None:
    if refusal.kind is RefusalKind.LAST_OWNER:
        raise LastOwner(refusal.sentence)
    raise PermissionDenied(refusal.sentence)


async def list_members(ctx: Ctx, project_id: uuid.UUID) -> list[dict[str, Any]]:
    async with project_scope(ctx, project_id) as (conn, _access):
        return await memberships.list_for_project(conn, project_id)


async def add_member(ctx: Ctx, project_id: uuid.UUID, email: str, role: str) -> dict[str, Any]:
    """A brain administrator gives an existing account a role; everyone else invites."""
    granted = role_named(role)
    async with project_scope(ctx, project_id, Permission.MEMBER_MANAGE) as (conn, access):
        if not ctx.actor.is_admin:
            raise PermissionDenied(
                "Only brain administrators add accounts directly; invite the email instead."
            )
        if not can_grant(access.role, granted):
            raise PermissionDenied(f"The {access.role} role cannot grant {granted}.")
        user = await user_store.get_by_email(conn, email)
        if user is None:
            raise UserNotFound("No user has this email; invite it instead.")
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


async def change_role(
    ctx: Ctx, project_id: uuid.UUID, user_id: uuid.UUID, role: str
) -> dict[str, Any]:
    new = role_named(role)
    async with project_scope(ctx, project_id, Permission.MEMBER_MANAGE) as (conn, access):
        owners = await memberships.lock_owners(conn, project_id)
        member = await memberships.get(conn, project_id, user_id)
        if member is None:
            raise MemberNotFound(user_id=str(user_id))
        current = Role(member["role"])
        refusal = role_change_refusal(access.role, current, new, owners)
        if refusal is not None:
            _raise(refusal)
        if new is not current:
            await memberships.set_role(conn, project_id, user_id, new.value)
            await audit.record(
                conn,
                ctx.brain,
                "member.role_change",
                actor=ctx.actor_id,
                project_id=project_id,
                target_type="user",
                target_id=user_id,
                details={"email": member["email"], "from": current.value, "to": new.value},
            )
    return {**member, "role": new.value}


async def remove_member(ctx: Ctx, project_id: uuid.UUID, user_id: uuid.UUID) -> None:
    """Remove a member; any member may leave (never the last owner)."""
    is_self = ctx.actor.id == user_id
    need = Permission.PROJECT_READ if is_self else Permission.MEMBER_MANAGE
    async with project_scope(ctx, project_id, need) as (conn, access):
        owners = await memberships.lock_owners(conn, project_id)
        member = await memberships.get(conn, project_id, user_id)
        if member is None:
            raise MemberNotFound(user_id=str(user_id))
        refusal = removal_refusal(access.role, Role(member["role"]), owners, is_self=is_self)
        if refusal is not None:
            _raise(refusal)
        await memberships.remove(conn, project_id, user_id)
        await audit.record(
            conn,
            ctx.brain,
            "member.remove",
            actor=ctx.actor_id,
            project_id=project_id,
            target_type="user",
            target_id=user_id,
            details={"email": member["email"], "role": member["role"]},
        )


async def restore_owner(ctx: Ctx, project_id: uuid.UUID, email: str) -> dict[str, Any]:
    """A brain administrator makes an existing account an owner of the project (a member
    promoted, or added), for a project whose owners cannot sign in any more; audited as
    ``member.restore_owner``. Nobody else can: only owners make owners."""
    async with project_scope(ctx, project_id, Permission.MEMBER_MANAGE) as (conn, _access):
        if not ctx.actor.is_admin:
            raise PermissionDenied("Only brain administrators restore a project's owner.")
        user = await user_store.get_by_email(conn, email)
        if user is None:
            raise UserNotFound("No user has this email.")
        member = await memberships.get(conn, project_id, user["id"])
        before = member["role"] if member is not None else None
        if member is None:
            await memberships.add(conn, user["id"], project_id, Role.OWNER.value)
        elif before != Role.OWNER.value:
            await memberships.set_role(conn, project_id, user["id"], Role.OWNER.value)
        await audit.record(
            conn,
            ctx.brain,
            "member.restore_owner",
            actor=ctx.actor_id,
            project_id=project_id,
            target_type="user",
            target_id=user["id"],
            details={"email": user["email"], "from": before},
        )
        row = await memberships.get(conn, project_id, user["id"])
    if row is None:  # written above, in this transaction: a concurrent removal got there first
        raise MemberNotFound(user_id=str(user["id"]))
    return row
