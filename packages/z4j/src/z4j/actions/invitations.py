"""Invitations: how people join a project.

A project admin or owner invites an email with a role (up to their own; owners only by
owners). The brain mails a link holding a one-time token, valid 72 hours; only the token's
HMAC is stored, and inviting the same email again replaces the pending invitation. The person
opening the link accepts it: signed in as the invited email, or, when no account has that email
yet, by choosing a password (the account is created then). Accepting marks the invitation used
in the same statement that checks it, so a link works once.

Audit: ``invitation.create`` and ``invitation.revoke`` by the inviter; ``member.add`` with
``details.invitation`` by the person who accepted.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from platformkit.db.scope import Conn, transaction
from platformkit.mail import Mail, MailError, OutboxMailer
from platformkit.tokens import mint_token

from z4j.actions import audit
from z4j.actions.access import project_scope, role_named
from z4j.actions.context import Ctx, User
from z4j.actions.errors import (
    AlreadyMember,
    InvitationForAnother,
    InvitationNotFound,
    MailFailed,
    PermissionDenied,
    UserEmailTaken,
)
from z4j.actions.users import check_credentials_shape, check_email, hash_in_thread
from z4j.brain import INVITATION_TOKEN, Brain
from z4j.domain.membership import INVITATION_VALID_FOR
from z4j.domain.roles import Permission, can_grant
from z4j.store import invitations, memberships
from z4j.store import users as user_store

log = logging.getLogger("z4j.invitations")


@dataclass(frozen=True)
class Sent:
    invitation: dict[str, Any]
    link: str  # for the mail only: never shown to the inviter, who could accept it


@dataclass(frozen=True)
class Offer:
    """What the link's page shows before accepting."""

    project_name: str
    email: str
    role: str
    expires_at: datetime
    account_exists: bool


def invitation_link(brain: Brain, token: str) -> str:
    return f"{brain.settings.base_url.rstrip('/')}/invite/{token}"


def _mail(project: str, role: str, inviter: User, link: str) -> tuple[str, str]:
    subject = f"You are invited to the z4j project {project}"
    text = (
        f"{inviter.label} invites you to the z4j project {project} as {role}.\n\n"
        f"Open this link within 72 hours to accept (it works once):\n{link}\n\n"
        "If you did not expect this, ignore this mail.\n"
    )
    return subject, text


async def invite(ctx: Ctx, project_id: uuid.UUID, email: str, role: str) -> Sent:
    granted = role_named(role)
    normalized = check_email(email)
    minted = mint_token(INVITATION_TOKEN, ctx.brain.token_hasher)
    async with project_scope(ctx, project_id, Permission.MEMBER_MANAGE) as (conn, access):
        if not can_grant(access.role, granted):
            raise PermissionDenied(f"The {access.role} role cannot grant {granted}.")
        user = await user_store.get_by_email(conn, normalized)
        if user is not None and await memberships.get(conn, project_id, user["id"]) is not None:
            raise AlreadyMember(email=normalized)
        row = await invitations.replace_pending(
            conn,
            project_id,
            normalized,
            granted.value,
            minted.hash,
            datetime.now(UTC) + INVITATION_VALID_FOR,
            ctx.actor.id,
        )
        await audit.record(
            conn,
            ctx.brain,
            "invitation.create",
            actor=ctx.actor_id,
            project_id=project_id,
            target_type="invitation",
            target_id=row["id"],
            details={"email": normalized, "role": granted.value},
        )
        project_name: str = access.project["name"]
    link = invitation_link(ctx.brain, minted.plaintext)
    subject, text = _mail(project_name, granted.value, ctx.actor, link)
    mailer = ctx.brain.mailer
    try:
        await mailer.send(Mail(normalized, subject, text))
    except MailError as exc:
        log.warning("invitation mail to %s not sent: %s", normalized, exc)
        raise MailFailed(
            f"The invitation exists but its mail was not sent ({exc}); revoke it or send again.",
            invitation_id=str(row["id"]),
        ) from exc
    if isinstance(mailer, OutboxMailer):
        log.info("invitation link for %s (no SMTP server configured): %s", normalized, link)
    return Sent(row, link)


async def list_pending(ctx: Ctx, project_id: uuid.UUID) -> list[dict[str, Any]]:
    async with project_scope(ctx, project_id, Permission.MEMBER_MANAGE) as (conn, _access):
        return await invitations.list_pending(conn, project_id)


async def revoke(ctx: Ctx, project_id: uuid.UUID, invitation_id: uuid.UUID) -> None:
    async with project_scope(ctx, project_id, Permission.MEMBER_MANAGE) as (conn, _access):
        if not await invitations.revoke(conn, project_id, invitation_id):
            raise InvitationNotFound()
        await audit.record(
            conn,
            ctx.brain,
            "invitation.revoke",
            actor=ctx.actor_id,
            project_id=project_id,
            target_type="invitation",
            target_id=invitation_id,
        )


def _token_hash(brain: Brain, token: str) -> str:
    if not INVITATION_TOKEN.matches(token):
        raise InvitationNotFound()
    return brain.token_hasher.hash(token)


async def offer(brain: Brain, token: str) -> Offer:
    token_hash = _token_hash(brain, token)
    async with transaction(brain.pool) as conn:
        row = await invitations.find_pending(conn, token_hash)
        if row is None:
            raise InvitationNotFound()
        account = await user_store.get_by_email(conn, row["email"])
    return Offer(row["project_name"], row["email"], row["role"], row["expires_at"], bool(account))


async def _join(conn: Conn, brain: Brain, token_hash: str, user: User) -> uuid.UUID:
    taken = await invitations.take(conn, token_hash)
    if taken is None:
        raise InvitationNotFound()
    if taken["email"] != user.email:
        raise InvitationForAnother(
            "Sign in as the invited email address to accept this invitation."
        )
    project_id: uuid.UUID = taken["project_id"]
    if await memberships.add(conn, user.id, project_id, taken["role"]) is None:
        raise AlreadyMember(email=user.email)
    await audit.record(
        conn,
        brain,
        "member.add",
        actor=user.id,
        project_id=project_id,
        target_type="user",
        target_id=user.id,
        details={"email": user.email, "role": taken["role"], "invitation": str(taken["id"])},
    )
    return project_id


async def accept(ctx: Ctx, token: str) -> uuid.UUID:
    """The signed-in user accepts an invitation to their own email; the project's id."""
    token_hash = _token_hash(ctx.brain, token)
    async with transaction(ctx.brain.pool) as conn:
        return await _join(conn, ctx.brain, token_hash, ctx.actor)


async def accept_with_new_account(
    brain: Brain, token: str, password: str, display_name: str | None = None
) -> tuple[User, uuid.UUID]:
    """Accept for an email that has no account yet: the account is created with ``password``.

    An email that has an account must sign in and accept instead (UserEmailTaken)."""
    token_hash = _token_hash(brain, token)
    async with transaction(brain.pool) as conn:
        pending = await invitations.find_pending(conn, token_hash)
    if pending is None:
        raise InvitationNotFound()
    email = check_credentials_shape(pending["email"], password)
    password_hash = await hash_in_thread(password)
    async with transaction(brain.pool) as conn:
        row = await user_store.create(conn, email, password_hash, display_name=display_name)
        if row is None:
            raise UserEmailTaken("An account has this email; sign in to accept.", email=email)
        user = User.from_row(row)
        await audit.record(
            conn,
            brain,
            "user.create",
            actor=user.id,
            target_type="user",
            target_id=user.id,
            details={"email": email, "is_admin": False, "invitation": str(pending["id"])},
        )
        project_id = await _join(conn, brain, token_hash, user)
    return user, project_id
