"""Integration tokens: create (plaintext returned once), list, revoke (04-API-SPEC §10.4)."""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from platformkit.db.scope import Conn
from platformkit.ids import uuid7
from platformkit.tokens import mint_token

from agentbus.actions.access import TENANT_ADMIN_ROLES, require_tenant_admin, tenant_scope
from agentbus.actions.audit import record_action
from agentbus.actions.context import Ctx
from agentbus.actions.validate import check_future, check_one_of, check_text
from agentbus.errors import NotFound, RequestInvalid, RoleRequired, StateConflict
from agentbus.ids import format_id
from agentbus.store import integration_tokens as store
from agentbus.store import users, workspaces

Row = dict[str, Any]


@dataclass(frozen=True)
class IssuedToken:
    """A new token: ``row`` as listed later, ``plaintext`` for the caller to show once."""

    row: Row
    plaintext: str = field(repr=False)


def clean_scopes(scopes: Iterable[str]) -> list[str]:
    wanted = set(scopes)
    unknown = wanted - set(store.SCOPES)
    if unknown or not wanted:
        raise RequestInvalid(
            f"scopes are a non-empty subset of {', '.join(store.SCOPES)}", field="scopes"
        )
    return [s for s in store.SCOPES if s in wanted]


async def issue_token(
    conn: Conn,
    ctx: Ctx,
    tenant_id: uuid.UUID,
    *,
    owner_user_id: uuid.UUID,
    name: str,
    env: str = "live",
    workspace_id: uuid.UUID | None = None,
    scopes: Iterable[str] = store.DEFAULT_SCOPES,
    expires_at: datetime | None = None,
) -> IssuedToken:
    """Checks and inserts inside a tenant transaction the caller holds (tenant create uses it
    for the bootstrap token)."""
    name = check_text(name, "name")
    env = check_one_of(env, tuple(store.TOKEN_FORMATS), "env")
    scope_list = clean_scopes(scopes)
    expires_at = check_future(expires_at, "expires_at")
    owner = await users.get_user(conn, tenant_id, owner_user_id)
    if owner is None:
        raise NotFound(f"no user {format_id('usr', owner_user_id)}", field="owner_user_id")
    if owner["status"] == "disabled":
        raise StateConflict("the token owner is disabled", field="owner_user_id")
    if workspace_id is None:
        if owner["tenant_role"] not in TENANT_ADMIN_ROLES:
            raise RoleRequired("only tenant owners and admins may own tenant-wide tokens")
    else:
        ws = await workspaces.get_workspace(conn, tenant_id, workspace_id)
        if ws is None or ws["deleted_at"] is not None:
            raise NotFound(f"no workspace {format_id('ws', workspace_id)}", field="workspace")
    minted = mint_token(store.TOKEN_FORMATS[env])
    token_id = uuid7()
    row = await store.insert_token(
        conn,
        tenant_id,
        token_id=token_id,
        owner_user_id=owner_user_id,
        workspace_id=workspace_id,
        name=name,
        env=env,
        hashed=bytes.fromhex(minted.hash),
        prefix=minted.display_prefix,
        last4=minted.last4,
        scopes=scope_list,
        expires_at=expires_at,
    )
    await record_action(
        conn,
        ctx,
        tenant_id,
        "token.create",
        target_type="integration_token",
        target_id=format_id("tok", token_id),
        details={"name": name, "env": env, "scopes": scope_list, "prefix": minted.display_prefix},
    )
    return IssuedToken(row, minted.plaintext)


async def create_integration_token(
    ctx: Ctx,
    tenant_id: uuid.UUID,
    *,
    owner_user_id: uuid.UUID,
    name: str,
    env: str = "live",
    workspace_id: uuid.UUID | None = None,
    scopes: Iterable[str] = store.DEFAULT_SCOPES,
    expires_at: datetime | None = None,
) -> IssuedToken:
    async with tenant_scope(ctx, tenant_id) as (conn, _tenant):
        await require_tenant_admin(conn, ctx, tenant_id)
        return await issue_token(
            conn,
            ctx,
            tenant_id,
            owner_user_id=owner_user_id,
            name=name,
            env=env,
            workspace_id=workspace_id,
            scopes=scopes,
            expires_at=expires_at,
        )


async def list_integration_tokens(
    ctx: Ctx,
    tenant_id: uuid.UUID,
    *,
    owner_user_id: uuid.UUID | None = None,
    include_revoked: bool = False,
) -> list[Row]:
    async with tenant_scope(ctx, tenant_id) as (conn, _tenant):
        await require_tenant_admin(conn, ctx, tenant_id)
        return await store.list_tokens(
            conn, tenant_id, owner_user_id=owner_user_id, include_revoked=include_revoked
        )


async def revoke_integration_token(
    ctx: Ctx, tenant_id: uuid.UUID, token_id: uuid.UUID, *, reason: str | None = None
) -> Row:
    """Revoke once; revoking a revoked token returns it unchanged (a repeated DELETE is safe)."""
    if reason is not None:
        reason = check_text(reason, "reason", max_length=500)
    async with tenant_scope(ctx, tenant_id) as (conn, _tenant):
        await require_tenant_admin(conn, ctx, tenant_id)
        row = await store.revoke_token(conn, tenant_id, token_id, reason)
        if row is None:
            existing = await store.get_token(conn, tenant_id, token_id)
            if existing is None:
                raise NotFound(f"no token {format_id('tok', token_id)}")
            return existing
        await record_action(
            conn,
            ctx,
            tenant_id,
            "token.revoke",
            target_type="integration_token",
            target_id=format_id("tok", token_id),
            details={"reason": reason},
        )
        return row


async def get_integration_token(ctx: Ctx, tenant_id: uuid.UUID, token_id: uuid.UUID) -> Row:
    async with tenant_scope(ctx, tenant_id) as (conn, _tenant):
        await require_tenant_admin(conn, ctx, tenant_id)
        row = await store.get_token(conn, tenant_id, token_id)
    if row is None:
        raise NotFound(f"no token {format_id('tok', token_id)}")
    return row
