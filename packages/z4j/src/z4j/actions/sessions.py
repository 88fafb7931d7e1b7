"""Signing in and out, and recognising a session cookie on later requests.

The cookie is ``<session id>.<secret>``: the id (UUIDv7) finds the ``sessions`` row by primary
key and the 32-byte random secret proves possession; the row keeps only
``HMAC-SHA256(session key, secret)`` in ``data.secret_hash``, so a copy of the table cannot be
replayed as cookies. Sessions slide: a request more than ``EXTEND_AFTER`` after the last
extension moves ``expires_at`` to now + ``session_days`` (at most one write per hour each).
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import secrets
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from platformkit.db.scope import transaction
from platformkit.ids import uuid7
from platformkit.passwords import needs_rehash, verify_password_or_dummy

from z4j.actions import audit, mfa
from z4j.actions.context import Ctx, User
from z4j.actions.errors import AuthRequired, InvalidCredentials, MfaCodeInvalid, SignInThrottled
from z4j.actions.users import hash_in_thread, password_policy
from z4j.brain import Brain
from z4j.store import mfa as mfa_store
from z4j.store import sessions as session_store
from z4j.store import users as user_store

EXTEND_AFTER = timedelta(hours=1)
MFA_WINDOW = timedelta(minutes=5)


@dataclass(frozen=True)
class SignedIn:
    user: User
    session_id: uuid.UUID
    cookie: str
    expires_at: datetime
    # The password was right and the account has two-factor sign-in: the session only lets
    # ``complete_mfa`` finish the sign-in, for ``MFA_WINDOW``.
    mfa_pending: bool = False


@dataclass(frozen=True)
class Session:
    user: User
    session_id: uuid.UUID
    expires_at: datetime
    extended: bool  # the cookie should be sent again with the new expiry


def _secret_hash(brain: Brain, secret: str) -> str:
    return hmac.new(
        brain.secrets.derive("session-secret"), secret.encode(), hashlib.sha256
    ).hexdigest()


def csrf_token(brain: Brain, session_id: uuid.UUID) -> str:
    """The token forms of this session carry: bound to it, so it needs no storage."""
    digest = hmac.new(brain.secrets.derive("csrf"), session_id.bytes, hashlib.sha256).digest()
    return base64.urlsafe_b64encode(digest).decode().rstrip("=")


def csrf_valid(brain: Brain, session_id: uuid.UUID, candidate: str) -> bool:
    return hmac.compare_digest(candidate.encode(), csrf_token(brain, session_id).encode())


def _lifetime(brain: Brain) -> timedelta:
    return timedelta(days=brain.settings.session_days)


async def login(brain: Brain, email: str, password: str, source: str | None) -> SignedIn:
    """Check the password and open a session; InvalidCredentials whatever was wrong.

    Throttled per email and per source address (platformkit.signin): while either is locked
    the answer is SignInThrottled with Retry-After and the password is not checked. An unknown
    or inactive account costs the same argon2 work as a wrong password (a dummy hash)."""
    policy = password_policy()
    account = user_store.normalize_email(email)
    wait = await brain.sign_in.check(brain.pool, account, source)
    if wait is not None:
        raise SignInThrottled(headers={"Retry-After": str(wait)})
    async with transaction(brain.pool) as conn:
        row = await user_store.get_by_email(conn, email)
    stored = row["password_hash"] if row is not None else None
    ok = await asyncio.to_thread(verify_password_or_dummy, stored, password, policy)
    if row is None or not ok or not row["is_active"]:
        await _failed(brain, account, source, row["id"] if row is not None else None)
        raise InvalidCredentials()
    user = User.from_row(row)
    rehash = await hash_in_thread(password) if needs_rehash(row["password_hash"], policy) else None
    secret = secrets.token_urlsafe(32)
    session_id = uuid7()
    data: dict[str, Any] = {"secret_hash": _secret_hash(brain, secret)}
    async with transaction(brain.pool) as conn:
        pending = await mfa_store.enabled(conn, user.id)
        expires_at = datetime.now(UTC) + (MFA_WINDOW if pending else _lifetime(brain))
        if rehash is not None:
            await user_store.set_password_hash(conn, user.id, rehash)
        await session_store.delete_expired_for_user(conn, user.id)
        await session_store.create(
            conn,
            session_id,
            user.id,
            expires_at,
            {**data, "mfa_pending": True} if pending else data,
        )
        if not pending:
            await audit.record(
                conn,
                brain,
                "auth.login",
                actor=user.id,
                target_type="session",
                target_id=session_id,
                details={"rehashed": rehash is not None},
            )
    if pending:  # the account's failures are cleared only once the code is right as well
        return SignedIn(user, session_id, f"{session_id}.{secret}", expires_at, mfa_pending=True)
    await brain.sign_in.success(brain.pool, account)
    return SignedIn(user, session_id, f"{session_id}.{secret}", expires_at)


async def _failed(
    brain: Brain, account: str, source: str | None, user_id: uuid.UUID | None
) -> None:
    """Count the failure; audit it when it names an account, and audit every lock it sets.
    Failures for emails that are no account are counted, not audited."""
    failure = await brain.sign_in.failure(brain.pool, account, source)
    actions = ["auth.login_failed"] if user_id is not None else []
    if failure.locked:
        actions.append("auth.login_locked")
    if not actions:
        return
    target_type = "user" if user_id is not None else None
    async with transaction(brain.pool) as conn:
        for action in actions:
            await audit.record(
                conn,
                brain,
                action,
                actor=None,
                target_type=target_type,
                target_id=user_id,
                details={**failure.details(), "source_ip": source},
            )


async def complete_mfa(brain: Brain, cookie: str | None, code: str, source: str | None) -> SignedIn:
    """Finish a sign-in that waits for its second factor: a TOTP code or a recovery code.
    Wrong codes count in the sign-in throttle like wrong passwords."""
    parsed = _parse_cookie(cookie) if cookie else None
    row = await _pending_row(brain, parsed)
    if parsed is None or row is None:
        raise AuthRequired("Sign in again: the two-factor step expired.")
    user = User.from_row(row)
    wait = await brain.sign_in.check(brain.pool, user.email, source)
    if wait is not None:
        raise SignInThrottled(headers={"Retry-After": str(wait)})
    session_id, secret = parsed
    expires_at = datetime.now(UTC) + _lifetime(brain)
    async with transaction(brain.pool) as conn:
        kind = await mfa.check_code(conn, brain, user.id, code)
        if kind is not None:
            data = {"secret_hash": _secret_hash(brain, secret)}
            if not await session_store.promote(conn, session_id, expires_at, data):
                raise AuthRequired("Sign in again: the two-factor step expired.")
            await audit.record(
                conn, brain, "auth.login", actor=user.id, target_type="session",
                target_id=session_id, details={"mfa": kind},
            )  # fmt: skip
    if kind is None:
        failure = await brain.sign_in.failure(brain.pool, user.email, source)
        async with transaction(brain.pool) as conn:
            await audit.record(
                conn, brain, "auth.mfa_failed", actor=None, target_type="user",
                target_id=user.id, details={**failure.details(), "source_ip": source},
            )  # fmt: skip
        raise MfaCodeInvalid("That code is not valid.", field="code")
    await brain.sign_in.success(brain.pool, user.email)
    return SignedIn(user, session_id, f"{session_id}.{secret}", expires_at)


async def _pending_row(brain: Brain, parsed: tuple[uuid.UUID, str] | None) -> dict[str, Any] | None:
    if parsed is None:
        return None
    async with transaction(brain.pool) as conn:
        row = await session_store.get_live_with_user(conn, parsed[0])
    if row is None or not row["data"].get("mfa_pending"):
        return None
    stored = str(row["data"].get("secret_hash", ""))
    if not hmac.compare_digest(stored.encode(), _secret_hash(brain, parsed[1]).encode()):
        return None
    return row


async def mfa_pending_user(brain: Brain, cookie: str | None) -> User | None:
    """Who a session waiting for its second factor belongs to (the code page shows it)."""
    row = await _pending_row(brain, _parse_cookie(cookie) if cookie else None)
    return User.from_row(row) if row is not None else None


def _parse_cookie(value: str) -> tuple[uuid.UUID, str] | None:
    ident, _, secret = value.partition(".")
    if not secret or len(secret) > 64 or len(ident) != 36:
        return None
    try:
        return uuid.UUID(ident), secret
    except ValueError:
        return None


async def resolve(brain: Brain, cookie: str | None) -> Session | None:
    """The live session a cookie names, extended when due; None for anything else."""
    parsed = _parse_cookie(cookie) if cookie else None
    if parsed is None:
        return None
    session_id, secret = parsed
    async with transaction(brain.pool) as conn:
        row = await session_store.get_live_with_user(conn, session_id)
        stored = str((row["data"] if row else {}).get("secret_hash", ""))
        if row is None or row["data"].get("mfa_pending"):
            return None
        if not hmac.compare_digest(stored.encode(), _secret_hash(brain, secret).encode()):
            return None
        expires_at: datetime = row["expires_at"]
        now = datetime.now(UTC)
        extended = now - (expires_at - _lifetime(brain)) >= EXTEND_AFTER
        if extended:
            expires_at = now + _lifetime(brain)
            await session_store.extend(conn, session_id, expires_at)
    return Session(User.from_row(row), session_id, expires_at, extended)


async def logout(ctx: Ctx) -> None:
    if ctx.session_id is None:
        return
    async with transaction(ctx.brain.pool) as conn:
        if await session_store.delete(conn, ctx.session_id):
            await audit.record(
                conn,
                ctx.brain,
                "auth.logout",
                actor=ctx.actor_id,
                target_type="session",
                target_id=ctx.session_id,
            )
