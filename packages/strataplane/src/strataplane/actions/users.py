"""Local users (argon2id passwords), installation-wide; platform admins manage them.

Hashing runs in a worker thread: argon2id at production cost takes tens of milliseconds of CPU
and must not stall the event loop.
"""

from __future__ import annotations

import asyncio
import re
from uuid import UUID

import psycopg
from platformkit.db.scope import Conn
from platformkit.ids import uuid7
from platformkit.passwords import PasswordPolicy, hash_password, needs_rehash, verify_password

from strataplane import errors
from strataplane.actions.access import platform_tx
from strataplane.actions.context import Ctx, Services
from strataplane.store import users
from strataplane.store.users import User

USERNAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@+-]{0,127}$")
# Verified when a username does not exist, so a miss costs what a wrong password costs.
_MISSING_USER_HASH: dict[PasswordPolicy, str] = {}


def check_username(username: str) -> None:
    if not USERNAME.fullmatch(username):
        raise errors.InvalidInput(
            "1 to 128 characters: letters, digits and . _ @ + -, starting with a letter or digit",
            field="username",
        )


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


async def check_password(services: Services, conn: Conn, username: str, password: str) -> User:
    """The enabled local user with this password, or InvalidCredentials (same for a missing
    user, a wrong password and a disabled account)."""
    policy = services.password_policy
    found = await users.get_local_login(conn, username)
    stored = found[1] if found is not None else None
    if found is None or stored is None:
        if policy not in _MISSING_USER_HASH:
            _MISSING_USER_HASH[policy] = await asyncio.to_thread(
                hash_password, "no such user", policy
            )
        await asyncio.to_thread(verify_password, password, _MISSING_USER_HASH[policy], policy)
        raise errors.InvalidCredentials()
    user = found[0]
    if not await asyncio.to_thread(verify_password, password, stored, policy):
        raise errors.InvalidCredentials()
    if user.disabled_at is not None:
        raise errors.InvalidCredentials()
    if needs_rehash(stored, policy):
        await users.set_password_hash(conn, user.id, await hash_in_thread(services, password))
    await users.touch_login(conn, user.id)
    return user


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
