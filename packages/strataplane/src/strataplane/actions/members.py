"""Tenant members: added (an existing user, or a new local user), disabled, enabled and
removed by tenant admins. Removing a membership removes the user's bindings, tokens and team
memberships in this tenant; service accounts are removed by deleting the service account."""

from __future__ import annotations

from uuid import UUID

import psycopg

from strataplane import errors
from strataplane.actions.access import tenant_tx
from strataplane.actions.context import Ctx
from strataplane.actions.users import insert_local_user
from strataplane.store import members, users
from strataplane.store.members import Member


async def add_member(
    ctx: Ctx,
    *,
    user_id: UUID | None = None,
    username: str | None = None,
    password: str | None = None,
    display_name: str | None = None,
    email: str | None = None,
) -> Member:
    """Add an existing human user by id, or create a local user and add it."""
    async with tenant_tx(ctx) as tx:
        tx.require("tenant.admin")
        created = False
        if user_id is None:
            if not username or not password:
                raise errors.InvalidInput("give user_id, or username and password")
            user = await insert_local_user(
                tx.conn, ctx.services, username, display_name or username, password, email=email
            )
            user_id, created = user.id, True
        else:
            found = await users.get_user(tx.conn, user_id)
            if found is None:
                raise errors.UserNotFound(field="user_id")
            if found.kind != "human":
                raise errors.NotHuman("service accounts belong to one tenant", field="user_id")
        try:
            member = await members.insert_member(tx.conn, tx.tenant_id, user_id, "local")
        except psycopg.errors.UniqueViolation:
            raise errors.AlreadyMember() from None
        await tx.audit(
            "member.add", "member", user_id, {"source": "local", "created_user": created}
        )
    return member


async def list_members(ctx: Ctx, *, after: UUID | None = None, limit: int = 100) -> list[Member]:
    async with tenant_tx(ctx) as tx:
        tx.require("tenant.admin")
        return await members.list_members(tx.conn, tx.tenant_id, after=after, limit=limit)


async def access_member(ctx: Ctx, user_id: UUID) -> Member:
    async with tenant_tx(ctx) as tx:
        tx.require("tenant.admin")
        member = await members.get_member(tx.conn, tx.tenant_id, user_id)
    if member is None:
        raise errors.MemberNotFound()
    return member


async def set_member_disabled(ctx: Ctx, user_id: UUID, disabled: bool) -> Member:
    """Disabling blocks the user's logins and tokens in this tenant only, at once."""
    async with tenant_tx(ctx) as tx:
        tx.require("tenant.admin")
        if not await members.set_disabled(tx.conn, tx.tenant_id, user_id, disabled):
            raise errors.MemberNotFound()
        member = await members.get_member(tx.conn, tx.tenant_id, user_id)
        if member is None:
            raise errors.MemberNotFound()
        await tx.audit("member.disable" if disabled else "member.enable", "member", user_id)
    return member


async def remove_member(ctx: Ctx, user_id: UUID) -> None:
    async with tenant_tx(ctx) as tx:
        tx.require("tenant.admin")
        member = await members.get_member(tx.conn, tx.tenant_id, user_id)
        if member is None:
            raise errors.MemberNotFound()
        if member.kind != "human":
            raise errors.NotHuman("delete the service account instead", field="user_id")
        await members.delete_member(tx.conn, tx.tenant_id, user_id)
        await tx.audit("member.remove", "member", user_id)
