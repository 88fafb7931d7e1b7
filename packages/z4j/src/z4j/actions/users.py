"""Users: the first administrator (setup), further accounts, and the password policy."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import re

from platformkit.db.scope import Conn, transaction
from platformkit.password_rules import WeakPassword as RuleRefused
from platformkit.password_rules import check_new_password
from platformkit.passwords import DEFAULT_POLICY, PasswordPolicy, hash_password

from z4j.actions import audit
from z4j.actions.context import Ctx, User
from z4j.actions.errors import (
    InvalidInput,
    PermissionDenied,
    SetupUnavailable,
    UserEmailTaken,
    WeakPassword,
)
from z4j.brain import Brain
from z4j.store import memberships, projects
from z4j.store import users as user_store

DEFAULT_PROJECT = "default"
_EMAIL = re.compile(r"[^@\s]+@[^@\s]+")
_SETUP_LOCK = int.from_bytes(hashlib.sha256(b"z4j.setup").digest()[:8], "big", signed=True)
_policy: PasswordPolicy = DEFAULT_POLICY


def use_password_policy(policy: PasswordPolicy) -> None:
    """Choose the argon2id cost (tests use the kernel's fast policy)."""
    global _policy
    _policy = policy


def password_policy() -> PasswordPolicy:
    return _policy


async def hash_in_thread(password: str) -> str:
    # argon2 takes tens of milliseconds of CPU; keep it off the event loop.
    return await asyncio.to_thread(hash_password, password, _policy)


def check_email(email: str) -> str:
    """Return the normalized email, or raise InvalidInput naming the field."""
    normalized = user_store.normalize_email(email)
    if len(normalized) > 320 or not _EMAIL.fullmatch(normalized):
        raise InvalidInput("Enter a valid email address.", field="email")
    return normalized


def check_credentials_shape(email: str, password: str, field: str = "password") -> str:
    """Return the normalized email, or raise InvalidInput naming the field. The password
    follows the kernel's rule (platformkit.password_rules): WeakPassword naming ``field``."""
    normalized = check_email(email)
    try:
        check_new_password(password, user_inputs=(normalized,))
    except RuleRefused as exc:
        raise WeakPassword(exc.message, field=field, reason=exc.reason) from None
    return normalized


async def has_users(brain: Brain) -> bool:
    async with transaction(brain.pool) as conn:
        return await user_store.any_exist(conn)


def setup_token(brain: Brain) -> str:
    """The one-time setup link's token: derived from the brain's secrets, so every worker
    agrees on it without storing it; it stops working once any user exists."""
    return base64.urlsafe_b64encode(brain.secrets.derive("setup")).decode().rstrip("=")


def setup_token_valid(brain: Brain, candidate: str) -> bool:
    return hmac.compare_digest(candidate.encode(), setup_token(brain).encode())


async def _create_admin(
    conn: Conn, brain: Brain, email: str, password_hash: str, action: str
) -> User | None:
    row = await user_store.create(conn, email, password_hash, is_admin=True)
    if row is None:
        return None
    user = User.from_row(row)
    project = await projects.get_by_name(conn, DEFAULT_PROJECT)
    if project is None:
        project = await projects.create(conn, DEFAULT_PROJECT)
        if project is not None:
            await audit.record(
                conn,
                brain,
                "project.create",
                actor=user.id,
                project_id=project["id"],
                target_type="project",
                target_id=project["id"],
                details={"name": DEFAULT_PROJECT},
            )
        else:  # an admin created "default" a moment ago (their path takes no setup lock)
            project = await projects.get_by_name(conn, DEFAULT_PROJECT)
    if project is None:
        raise RuntimeError("the default project could be neither found nor created")
    await memberships.add(conn, user.id, project["id"], "owner")
    await audit.record(
        conn,
        brain,
        action,
        actor=user.id,
        target_type="user",
        target_id=user.id,
        details={"email": user.email, "is_admin": True},
    )
    return user


async def create_first_admin(brain: Brain, email: str, password: str) -> bool:
    """Create a brain admin who owns the "default" project; False if the email exists."""
    normalized = check_credentials_shape(email, password)
    password_hash = await hash_in_thread(password)
    async with transaction(brain.pool) as conn:
        await conn.execute("SELECT pg_advisory_xact_lock(%s)", (_SETUP_LOCK,))
        user = await _create_admin(conn, brain, normalized, password_hash, "user.create_admin")
    return user is not None


async def complete_setup(brain: Brain, token: str, email: str, password: str) -> User:
    """The setup page: create the first admin once, while no user exists."""
    if not setup_token_valid(brain, token):
        raise SetupUnavailable("This setup link is not valid.")
    normalized = check_credentials_shape(email, password)
    password_hash = await hash_in_thread(password)
    async with transaction(brain.pool) as conn:
        await conn.execute("SELECT pg_advisory_xact_lock(%s)", (_SETUP_LOCK,))
        if await user_store.any_exist(conn):
            raise SetupUnavailable("Setup is done; sign in instead.")
        user = await _create_admin(conn, brain, normalized, password_hash, "setup.complete")
    if user is None:  # cannot happen: no user existed under the lock
        raise SetupUnavailable("Setup is done; sign in instead.")
    return user


async def create_user(
    ctx: Ctx, email: str, password: str, *, is_admin: bool = False, display_name: str | None = None
) -> User:
    """A brain admin creates an account; projects are granted separately (members)."""
    if not ctx.actor.is_admin:
        raise PermissionDenied("Only brain administrators create users.")
    normalized = check_credentials_shape(email, password)
    password_hash = await hash_in_thread(password)
    async with transaction(ctx.brain.pool) as conn:
        row = await user_store.create(
            conn, normalized, password_hash, is_admin=is_admin, display_name=display_name
        )
        if row is None:
            raise UserEmailTaken(email=normalized)
        user = User.from_row(row)
        await audit.record(
            conn,
            ctx.brain,
            "user.create",
            actor=ctx.actor_id,
            target_type="user",
            target_id=user.id,
            details={"email": user.email, "is_admin": is_admin},
        )
    return user
