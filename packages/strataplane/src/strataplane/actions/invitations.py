"""Invitations (docs/decisions/0022): a tenant admin invites an existing user by id (the
console: by username or email, docs/decisions/0054) and learns nothing about the user; the
user, signed in with any credential of their own, sees who invites them and becomes a member
only by accepting. Removing the need for consent would let any tenant admin pull any account
of the installation into their tenant and read its details.

Audit (the tenant chain): ``invitation.create``, ``invitation.revoke`` by the admin;
``member.add`` (details.invitation) and ``invitation.decline`` by the invited user.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from uuid import UUID

import psycopg
from platformkit.db.scope import platform_transaction, tenant_transaction
from platformkit.ids import uuid7

from strataplane import errors
from strataplane.actions.access import TenantTx, check_tenant, tenant_tx
from strataplane.actions.context import Ctx, Principal
from strataplane.db import SCOPE
from strataplane.store import audit, invitations, members, users
from strataplane.store.invitations import Invitation, ReceivedInvitation

VALID_FOR = timedelta(days=14)


async def invite_member(ctx: Ctx, user_id: UUID) -> Invitation:
    """Invite an existing human user; inviting again renews the pending invitation."""
    async with tenant_tx(ctx) as tx:
        tx.require("tenant.admin")
        user = await users.get_user(tx.conn, user_id)
        if user is None or user.kind != "human":
            raise errors.UserNotFound(field="user_id")
        return await _invite(tx, user_id)


async def invite_by_login(ctx: Ctx, login: str) -> Invitation:
    """Invite the person whose local username or email is ``login`` (the console's form: people
    know each other by name, not by id); the same invitation, and consent, as by id."""
    async with tenant_tx(ctx) as tx:
        tx.require("tenant.admin")
        found = await users.find_people(tx.conn, login.strip()) if login.strip() else []
        if len(found) != 1:
            detail = (
                "several people share that email; give the username"
                if found
                else "no person of this installation has that username or email"
            )
            raise errors.InvalidInput(detail, field="login")
        return await _invite(tx, found[0].id)


async def _invite(tx: TenantTx, user_id: UUID) -> Invitation:
    if await members.get_member(tx.conn, tx.tenant_id, user_id) is not None:
        raise errors.AlreadyMember(field="user_id")
    expires = datetime.now(UTC) + VALID_FOR
    invitation = await invitations.upsert_invitation(
        tx.conn, tx.tenant_id, uuid7(), user_id, tx.ctx.user_id, expires
    )
    await tx.audit("invitation.create", "invitation", invitation.id, {"user_id": str(user_id)})
    return invitation


async def list_invitations(
    ctx: Ctx, *, after: UUID | None = None, limit: int = 100
) -> list[Invitation]:
    async with tenant_tx(ctx) as tx:
        tx.require("tenant.admin")
        return await invitations.list_invitations(tx.conn, tx.tenant_id, after=after, limit=limit)


async def revoke_invitation(ctx: Ctx, invitation_id: UUID) -> None:
    async with tenant_tx(ctx) as tx:
        tx.require("tenant.admin")
        if not await invitations.delete_invitation(tx.conn, tx.tenant_id, invitation_id):
            raise errors.InvitationNotFound()
        await tx.audit("invitation.revoke", "invitation", invitation_id)


def _invitee(principal: Principal) -> None:
    if principal.kind != "human":
        raise errors.NotHuman("invitations are for people", field="user_id")


async def received_invitations(ctx: Ctx, principal: Principal) -> list[ReceivedInvitation]:
    """The caller's own pending invitations, with the tenants that sent them."""
    _invitee(principal)
    async with platform_transaction(ctx.pool, SCOPE) as conn:
        return await invitations.received(conn, principal.user_id)


async def answer_invitation(
    ctx: Ctx, principal: Principal, invitation_id: UUID, *, accept: bool
) -> UUID:
    """Accept (become a member, no role yet) or decline the caller's own invitation; the
    tenant's id. Another user's invitation is not found."""
    _invitee(principal)
    async with platform_transaction(ctx.pool, SCOPE) as conn:
        tenant_id = await invitations.tenant_of(conn, invitation_id, principal.user_id)
    if tenant_id is None:
        raise errors.InvitationNotFound()
    async with tenant_transaction(ctx.pool, SCOPE, tenant_id) as conn:
        await check_tenant(conn, tenant_id)
        taken = await invitations.take_invitation(conn, tenant_id, invitation_id, principal.user_id)
        if taken is None:
            raise errors.InvitationNotFound()
        if accept:
            try:
                async with conn.transaction():
                    await members.insert_member(conn, tenant_id, principal.user_id, "local")
            except psycopg.errors.UniqueViolation:
                raise errors.AlreadyMember() from None
            action, kind, object_id = "member.add", "member", principal.user_id
            details = {"source": "local", "invitation": str(invitation_id)}
        else:
            action, kind, object_id = "invitation.decline", "invitation", invitation_id
            details = {}
        event = audit.Event(
            "user",
            str(principal.user_id),
            action,
            kind,
            str(object_id),
            request_id=ctx.request_id,
            source_ip=ctx.source_ip,
            details=details,
        )
        await audit.append(conn, tenant_id, event)
    return tenant_id
