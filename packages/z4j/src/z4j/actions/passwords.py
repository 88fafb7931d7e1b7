"""Forgotten and changed passwords.

A reset starts from an email address: when an active account has it, the brain stores the
HMAC of a one-time token valid 60 minutes (a newer request replaces it) and mails the link
``<public URL>/reset-password/<token>``. The answer is the same whether or not an account has
the address, and the mail leaves after the answer, so its timing tells nothing either. An
account gets at most one such mail a minute (later requests within it are answered alike and
send nothing).
Resetting ends every session of the account. Changing a password needs the current one
(wrong guesses count in the sign-in throttle) and ends the user's other sessions.

Audit: ``password.reset_request`` (only for an account), ``password.reset``, ``password.change``.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from datetime import UTC, datetime, timedelta

from platformkit.db.scope import transaction
from platformkit.mail import Mail, MailError, OutboxMailer
from platformkit.passwords import verify_password
from platformkit.tokens import mint_token

from z4j.actions import audit
from z4j.actions.context import Ctx
from z4j.actions.errors import ResetNotFound, SessionRequired, SignInThrottled, WrongPassword
from z4j.actions.users import check_credentials_shape, check_email, hash_in_thread, password_policy
from z4j.brain import RESET_TOKEN, Brain
from z4j.store import password_resets, sessions
from z4j.store import users as user_store

RESET_VALID_FOR = timedelta(minutes=60)
RESEND_AFTER_SECONDS = 60
log = logging.getLogger("z4j.passwords")
_mails: set[asyncio.Task[None]] = set()


def reset_link(brain: Brain, token: str) -> str:
    return f"{brain.settings.base_url.rstrip('/')}/reset-password/{token}"


async def _send(brain: Brain, mail: Mail, link: str) -> None:
    mailer = brain.mailer
    try:
        await mailer.send(mail)
    except MailError as exc:
        log.warning("password reset mail to %s not sent: %s", mail.to, exc)
        return
    if isinstance(mailer, OutboxMailer):
        log.info("password reset link for %s (no SMTP server configured): %s", mail.to, link)


async def request_reset(brain: Brain, email: str) -> None:
    """Mail a reset link when an active account has ``email``; silent otherwise."""
    normalized = check_email(email)
    minted = mint_token(RESET_TOKEN, brain.token_hasher)
    async with transaction(brain.pool) as conn:
        user = await user_store.get_by_email(conn, normalized)
        if user is None or not user["is_active"]:
            return
        if await password_resets.recently_sent(conn, user["id"], RESEND_AFTER_SECONDS):
            return  # one mail a minute per account: the form cannot flood a mailbox
        token_id = await password_resets.replace_pending(
            conn, user["id"], minted.hash, datetime.now(UTC) + RESET_VALID_FOR
        )
        await audit.record(
            conn,
            brain,
            "password.reset_request",
            actor=None,
            target_type="user",
            target_id=user["id"],
            details={"token": str(token_id)},
        )
    link = reset_link(brain, minted.plaintext)
    text = (
        "Someone asked to reset the password of your z4j account.\n\n"
        f"Open this link within 60 minutes to choose a new one (it works once):\n{link}\n\n"
        "If it was not you, ignore this mail; your password stays as it is.\n"
    )
    mail = Mail(normalized, "Reset your z4j password", text)
    task = asyncio.create_task(_send(brain, mail, link))
    _mails.add(task)
    task.add_done_callback(_mails.discard)


def _token_hash(brain: Brain, token: str) -> str:
    if not RESET_TOKEN.matches(token):
        raise ResetNotFound()
    return brain.token_hasher.hash(token)


async def reset_email(brain: Brain, token: str) -> str:
    """The email of the account a pending reset link is for (the page shows it)."""
    token_hash = _token_hash(brain, token)
    async with transaction(brain.pool) as conn:
        row = await password_resets.find_pending(conn, token_hash)
    if row is None:
        raise ResetNotFound()
    email: str = row["email"]
    return email


async def reset_password(brain: Brain, token: str, password: str) -> str:
    """Set a new password with a reset link (once); every session of the account ends.
    Returns the account's email."""
    email = await reset_email(brain, token)
    check_credentials_shape(email, password)
    password_hash = await hash_in_thread(password)
    async with transaction(brain.pool) as conn:
        taken = await password_resets.take(conn, _token_hash(brain, token))
        if taken is None:
            raise ResetNotFound()
        user_id: uuid.UUID = taken["user_id"]
        await user_store.set_password_hash(conn, user_id, password_hash)
        ended = await sessions.delete_for_user(conn, user_id)
        await audit.record(
            conn,
            brain,
            "password.reset",
            actor=user_id,
            target_type="user",
            target_id=user_id,
            details={"sessions_ended": ended, "token": str(taken["id"])},
        )
    await brain.sign_in.success(brain.pool, email)
    return email


async def change_password(ctx: Ctx, current: str, new: str, source: str | None) -> None:
    """The signed-in user changes their password; their other sessions end."""
    user = ctx.actor
    if ctx.session_id is None:
        raise SessionRequired()
    brain = ctx.brain
    wait = await brain.sign_in.check(brain.pool, user.email, source)
    if wait is not None:
        raise SignInThrottled(headers={"Retry-After": str(wait)})
    async with transaction(brain.pool) as conn:
        row = await user_store.get(conn, user.id)
    stored = row["password_hash"] if row is not None else ""
    ok = await asyncio.to_thread(verify_password, current, stored, password_policy())
    if not ok:
        failure = await brain.sign_in.failure(brain.pool, user.email, source)
        async with transaction(brain.pool) as conn:
            await audit.record(
                conn,
                brain,
                "password.change_failed",
                actor=user.id,
                target_type="user",
                target_id=user.id,
                details={**failure.details(), "source_ip": source},
            )
        raise WrongPassword("The current password is not right.", field="current_password")
    check_credentials_shape(user.email, new, field="new_password")
    password_hash = await hash_in_thread(new)
    async with transaction(brain.pool) as conn:
        await user_store.set_password_hash(conn, user.id, password_hash)
        ended = await sessions.delete_for_user(conn, user.id, keep=ctx.session_id)
        await audit.record(
            conn,
            brain,
            "password.change",
            actor=user.id,
            target_type="user",
            target_id=user.id,
            details={"sessions_ended": ended},
        )
    await brain.sign_in.success(brain.pool, user.email)
