"""Local users (argon2id passwords), installation-wide; platform admins manage them.

Hashing runs in a worker thread: argon2id at production cost takes tens of milliseconds of CPU
and must not stall the event loop.
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass
from uuid import UUID

import psycopg
from platformkit.db.scope import Conn
from platformkit.ids import uuid7
from platformkit.password_rules import WeakPassword, check_new_password
from platformkit.passwords import hash_password, needs_rehash, verify_password_or_dummy

from strataplane import errors
from strataplane.actions.access import platform_tx
from strataplane.actions.context import Ctx, Services
from strataplane.store import users
from strataplane.store.users import User

USERNAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@+-]{0,127}$")


def check_username(username: str) -> None:
    if not USERNAME.fullmatch(username):
        raise errors.InvalidInput(
            "1 to 128 characters: letters, digits and . _ @ + -, starting with a letter or digit",
            field="username",
        )


def check_new_password_of(username: str, email: str | None, password: str) -> None:
    """The kernel's rule for a password being chosen: WeakPassword (422, field password)."""
    try:
        check_new_password(password, user_inputs=(username, email or ""))
    except WeakPassword as exc:
        raise errors.WeakPassword(exc.message, field="password", reason=exc.reason) from None


async def hash_in_thread(services: Services, password: str) -> str:
    return await asyncio.to_thread(hash_password, password, services.password_policy)


async def insert_local_user(
    conn: Conn,
    services: Services,
    username: str,
    display_name: str,
    password: str,
    *,
    email: str | None = None,
    platform_admin: bool = False,
) -> User:
    check_username(username)
    check_new_password_of(username, email, password)
    password_hash = await hash_in_thread(services, password)
    try:
        return await users.insert_user(
            conn,
            uuid7(),
            kind="human",
            issuer=users.LOCAL,
            subject=username,
            display_name=display_name,
            email=email,
            password_hash=password_hash,
            platform_admin=platform_admin,
        )
    except psycopg.errors.UniqueViolation:
        raise errors.UsernameTaken(field="username") from None


@dataclass(frozen=True)
class PasswordCheck:
    """A sign-in's verdict: ``user`` is the account named (None: no such local user), ``ok``
    whether it may sign in (an enabled account and the right password)."""

    user: User | None
    ok: bool


async def check_password(
    services: Services, conn: Conn, username: str, password: str
) -> PasswordCheck:
    """Verify a sign-in. A missing user, an account without a password, a wrong password and
    a disabled account all come back not ok, after the same argon2 work."""
    policy = services.password_policy
    found = await users.get_local_login(conn, username)
    user, stored = found if found is not None else (None, None)
    ok = await asyncio.to_thread(verify_password_or_dummy, stored, password, policy)
    if user is None or not ok or user.disabled_at is not None:
        return PasswordCheck(user, False)
    if stored is not None and needs_rehash(stored, policy):
        await users.set_password_hash(conn, user.id, await hash_in_thread(services, password))
    await users.touch_login(conn, user.id)
    return PasswordCheck(user, True)


async def create_user(
    ctx: Ctx,
    username: str,
    display_name: str,
    password: str,
    *,
    email: str | None = None,
    platform_admin: bool = False,
) -> User:
    async with platform_tx(ctx) as tx:
        user = await insert_local_user(
            tx.conn,
            ctx.services,
            username,
            display_name,
            password,
            email=email,
            platform_admin=platform_admin,
        )
        await tx.audit(
            "user.create",
            "user",
            user.id,
            details={"username": username, "platform_admin": platform_admin},
        )
    return user


async def set_user_disabled(ctx: Ctx, user_id: UUID, disabled: bool) -> User:
    async with platform_tx(ctx) as tx:
        user = await users.set_disabled(tx.conn, user_id, disabled)
        if user is None:
            raise errors.UserNotFound()
        await tx.audit("user.disable" if disabled else "user.enable", "user", user_id)
    return user


async def list_users(ctx: Ctx, *, after: UUID | None = None, limit: int = 100) -> list[User]:
    async with platform_tx(ctx) as tx:
        return await users.list_users(tx.conn, after=after, limit=limit)


async def access_user(ctx: Ctx, user_id: UUID) -> User:
    async with platform_tx(ctx) as tx:
        user = await users.get_user(tx.conn, user_id)
    if user is None:
        raise errors.UserNotFound()
    return user
