"""Tenant members: added as new local users by tenant admins (existing users are invited and
accept, actions/invitations.py), disabled, enabled and removed by tenant admins; removing or
disabling the last enabled admin is refused (``TenantTx.keeping_an_admin``). Removing a
membership removes the user's bindings, tokens and team memberships in this tenant; service
accounts are removed by deleting the service account."""

from __future__ import annotations

from uuid import UUID

from strataplane import errors
from strataplane.actions.access import tenant_tx
from strataplane.actions.context import Ctx
from strataplane.actions.users import insert_local_user
from strataplane.store import members
from strataplane.store.members import Member


async def add_member(
    ctx: Ctx,
    *,
    username: str,
    password: str,
    display_name: str | None = None,
    email: str | None = None,
) -> Member:
    """Create a local user and make it a member. An existing user joins only by accepting an
    invitation (actions/invitations.py)."""
    async with tenant_tx(ctx) as tx:
        tx.require("tenant.admin")
        user = await insert_local_user(
            tx.conn, ctx.services, username, display_name or username, password, email=email
        )
        member = await members.insert_member(tx.conn, tx.tenant_id, user.id, "local")
        await tx.audit("member.add", "member", user.id, {"source": "local", "created_user": True})
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
        async with tx.keeping_an_admin():
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
        async with tx.keeping_an_admin():
            await members.delete_member(tx.conn, tx.tenant_id, user_id)
        await tx.audit("member.remove", "member", user_id)
