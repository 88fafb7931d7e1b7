"""Invitations to a tenant and, optionally, one of its workspaces (04-API-SPEC §10.3).

A tenant owner or admin invites an e-mail address with a workspace role; the one-time token is
shown only in the mail (its SHA-256 is stored) and lasts ``INVITATION_TTL`` (7 days). Accepting
takes the token alone: the invitee becomes a user of the tenant (tenant role ``member``, IdP
``invitation``, subject the e-mail, until they sign in through the tenant's IdP), a member of
the workspace with the invited role, and, for a workspace invitation, gets an integration token
bound to that workspace (shown once). A token is accepted once, before it expires; an e-mail
that is already a user is refused (AB-8003) on both sides.
"""

from __future__ import annotations

import hashlib
import secrets
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
from platformkit.db.scope import Pool, tenant_transaction, transaction
from platformkit.mail import Mail, Mailer

from agentbus.actions.access import require_tenant_admin, tenant_scope
from agentbus.actions.audit import record_action
from agentbus.actions.context import Actor, Ctx
from agentbus.actions.tokens import IssuedToken, issue_token
from agentbus.actions.users import OwnerSpec, add_user
from agentbus.actions.validate import check_email, check_one_of
from agentbus.actions.workspaces import WS_ROLES
from agentbus.db import SCOPE
from agentbus.errors import AlreadyExists, NotFound, StateConflict
from agentbus.ids import format_id
from agentbus.store import invitations, workspaces
from agentbus.store.workspaces import set_member

Row = dict[str, Any]
INVITATION_TTL = timedelta(days=7)
TOKEN_PREFIX = "abinv_"  # noqa: S105 - the public prefix of the tokens, not a secret
TOKEN_MAX = 200


def token_hash(token: str) -> bytes:
    return hashlib.sha256(token.encode()).digest()


@dataclass(frozen=True)
class Invited:
    row: Row
    token: str
    tenant_slug: str


async def invite(
    ctx: Ctx, tenant_id: uuid.UUID, *, email: str, workspace_id: uuid.UUID | None,
    role: str = "member",
) -> Invited:  # fmt: skip
    email, role = check_email(email), check_one_of(role, WS_ROLES, "role")
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    async with tenant_scope(ctx, tenant_id) as (conn, tenant):
        await require_tenant_admin(conn, ctx, tenant_id)
        if ctx.actor.user_id is None:
            raise StateConflict("an invitation names the user who sends it; use an admin token")
        if await invitations.email_is_user(conn, tenant_id, email):
            raise AlreadyExists(f"{email} is already a user of this tenant", field="email")
        if workspace_id is not None:
            ws = await workspaces.get_workspace(conn, tenant_id, workspace_id)
            if ws is None or ws["deleted_at"] is not None:
                raise NotFound(f"no workspace {format_id('ws', workspace_id)}", field="workspace")
        row = await invitations.insert_invitation(
            conn, tenant_id, workspace_id=workspace_id, email=email, role=role,
            token_hash=token_hash(token), invited_by=ctx.actor.user_id,
            expires_at=datetime.now(UTC) + INVITATION_TTL,
        )  # fmt: skip
        await record_action(
            conn, ctx, tenant_id, "invitation.create", target_type="invitation",
            target_id=format_id("inv", row["id"]),
            details={"email": email, "role": role, "workspace": None if workspace_id is None
                     else format_id("ws", workspace_id)},
        )  # fmt: skip
    return Invited(row, token, tenant["slug"])


def invitation_mail(invited: Invited, base_url: str) -> Mail:
    row, where = invited.row, "the tenant"
    if row["workspace_id"] is not None:
        where = f"workspace {format_id('ws', row['workspace_id'])} ({row['role']})"
    text = (
        f"You are invited to {where} of {invited.tenant_slug} on AgentBus.\n\n"
        f"Accept before {row['expires_at']:%Y-%m-%d %H:%M} UTC; the link works once:\n\n"
        f"  curl -X POST {base_url}/v1/invitations/accept -H 'Content-Type: application/json' "
        f'-d \'{{"token": "{invited.token}"}}\'\n\n'
        f"If you did not expect this, ignore it: nothing happens until it is accepted.\n"
    )
    return Mail(row["email"], f"Join {invited.tenant_slug} on AgentBus", text)


async def send_invitation(mailer: Mailer, invited: Invited, base_url: str) -> None:
    """After the commit: the mail fails loudly (MailError), the invitation stands."""
    await mailer.send(invitation_mail(invited, base_url))


async def list_pending(ctx: Ctx, tenant_id: uuid.UUID) -> list[Row]:
    async with tenant_scope(ctx, tenant_id) as (conn, _tenant):
        await require_tenant_admin(conn, ctx, tenant_id)
        return await invitations.list_pending(conn, tenant_id)


async def revoke(ctx: Ctx, tenant_id: uuid.UUID, invitation_id: uuid.UUID) -> None:
    async with tenant_scope(ctx, tenant_id) as (conn, _tenant):
        await require_tenant_admin(conn, ctx, tenant_id)
        if not await invitations.delete_pending(conn, tenant_id, invitation_id):
            raise NotFound(f"no pending invitation {format_id('inv', invitation_id)}")
        await record_action(conn, ctx, tenant_id, "invitation.revoke", target_type="invitation",
                            target_id=format_id("inv", invitation_id))  # fmt: skip


@dataclass(frozen=True)
class Accepted:
    user: Row
    workspace_id: uuid.UUID | None
    role: str
    token: IssuedToken | None


async def accept(pool: Pool, token: str, *, display_name: str | None = None) -> Accepted:
    """Redeem the one-time token; AB-8002 for an unknown one, AB-8008 once used or expired."""
    unknown = NotFound("no invitation with this token")
    if not token.startswith(TOKEN_PREFIX) or len(token) > TOKEN_MAX:
        raise unknown
    digest = token_hash(token)
    async with transaction(pool) as conn:
        found = await invitations.lookup(conn, digest)
    if found is None:
        raise unknown
    tenant_id = found["tenant_id"]
    try:
        async with tenant_transaction(pool, SCOPE, tenant_id) as conn:
            row = await invitations.lock(conn, tenant_id, found["id"])
            if row is None or not secrets.compare_digest(bytes(row["token_hash"]), digest):
                raise unknown
            if row["accepted_at"] is not None:
                raise StateConflict("this invitation was accepted already")
            if row["expires_at"] <= datetime.now(UTC):
                raise StateConflict("this invitation has expired; ask for a new one")
            system = Ctx(pool, Actor.system("invitation"))
            spec = OwnerSpec(row["email"], "invitation", row["email"], display_name)
            user = await add_user(conn, system, tenant_id, spec, "member")
            as_user = Ctx(pool, Actor.user(tenant_id, user["id"]))
            issued = None
            if row["workspace_id"] is not None:
                await set_member(conn, tenant_id, row["workspace_id"], user["id"], row["role"],
                                 row["invited_by"])  # fmt: skip
                issued = await issue_token(
                    conn, as_user, tenant_id, owner_user_id=user["id"], name="invitation",
                    workspace_id=row["workspace_id"],
                )  # fmt: skip
            await invitations.mark_accepted(conn, tenant_id, row["id"])
            await record_action(
                conn, as_user, tenant_id, "invitation.accept", target_type="invitation",
                target_id=format_id("inv", row["id"]), details={"role": row["role"]},
            )  # fmt: skip
    except psycopg.errors.UniqueViolation as exc:
        raise AlreadyExists("this e-mail is already a user of the tenant", field="email") from exc
    return Accepted(user, row["workspace_id"], row["role"], issued)
