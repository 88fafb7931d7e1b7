"""API keys: a user's bearer credential for one project's API.

A signed-in user creates a key for a project they belong to, with a role no higher than their
own there; the key is shown once and only its HMAC-SHA256 is stored. Every use re-reads the
owner: a disabled owner or a revoked key stops at once, and the key acts with the lower of
its role and the owner's current one (``z4j.domain.api_keys``). Keys work on the REST API
only, never on the dashboard, and cannot manage keys, passwords or two-factor settings.

Audit: ``api_key.create``, ``api_key.revoke``.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from platformkit.tokens import mint_token

from z4j.actions import audit
from z4j.actions.access import project_scope, role_named
from z4j.actions.context import Ctx, KeyGrant, User
from z4j.actions.errors import ApiKeyNotFound, InvalidInput, PermissionDenied, SessionRequired
from z4j.brain import API_KEY, Brain
from z4j.domain.api_keys import grantable
from z4j.domain.roles import Permission
from z4j.store import api_keys


@dataclass(frozen=True)
class CreatedKey:
    key: dict[str, Any]
    token: str  # shown once


@dataclass(frozen=True)
class KeyAuth:
    user: User
    grant: KeyGrant


def _session_only(ctx: Ctx) -> User:
    user = ctx.actor
    if ctx.session_id is None:
        raise SessionRequired("Manage API keys from a signed-in session, not with a key.")
    return user


def _clean_name(name: str) -> str:
    name = name.strip()
    if not 1 <= len(name) <= 200:
        raise InvalidInput("Name the key (1 to 200 characters).", field="name")
    return name


async def create_key(ctx: Ctx, project_id: uuid.UUID, name: str, role: str) -> CreatedKey:
    user = _session_only(ctx)
    wanted = role_named(role)
    clean = _clean_name(name)
    minted = mint_token(API_KEY, ctx.brain.token_hasher)
    async with project_scope(ctx, project_id, Permission.PROJECT_READ) as (conn, access):
        if not grantable(access.role, wanted):
            raise PermissionDenied(f"A key's role is at most yours ({access.role}).", field="role")
        row = await api_keys.create(
            conn, user.id, project_id, clean, wanted.value, minted.hash, minted.display_prefix
        )
        await audit.record(
            conn,
            ctx.brain,
            "api_key.create",
            actor=user.id,
            project_id=project_id,
            target_type="api_key",
            target_id=row["id"],
            details={"name": clean, "role": wanted.value, "prefix": minted.display_prefix},
        )
    return CreatedKey(row, minted.plaintext)


async def list_keys(ctx: Ctx) -> list[dict[str, Any]]:
    user = _session_only(ctx)
    async with ctx.brain.platform_tx() as conn:
        return await api_keys.list_for_user(conn, user.id)


async def revoke_key(ctx: Ctx, key_id: uuid.UUID) -> None:
    user = _session_only(ctx)
    async with ctx.brain.platform_tx() as conn:
        row = await api_keys.revoke(conn, user.id, key_id)
        if row is None:
            raise ApiKeyNotFound()
        await audit.record(
            conn,
            ctx.brain,
            "api_key.revoke",
            actor=user.id,
            project_id=row["project_id"],
            target_type="api_key",
            target_id=key_id,
            details={"name": row["name"], "prefix": row["prefix"]},
        )


async def authenticate(brain: Brain, token: str) -> KeyAuth | None:
    """The key and owner a bearer token names, its use recorded; None for anything else."""
    if not API_KEY.matches(token):
        return None
    async with brain.platform_tx() as conn:
        row = await api_keys.find_live(conn, brain.token_hasher.hash(token))
        if row is None:
            return None
        await api_keys.touch(conn, row["id"])
    user = User(row["user_id"], row["email"], row["display_name"], is_admin=False)
    return KeyAuth(user, KeyGrant(row["id"], row["project_id"], row["role"], row["is_admin"]))
