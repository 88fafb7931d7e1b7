"""API tokens: 'spk_' + 32 random bytes in base32, shown once; only sha256(token) is stored,
with the first 8 characters for display.

Any member with a role creates and revokes their own tokens; an allowlist (``roles``) may name
only roles the member holds now, and is re-intersected with the current bindings on every
request. Tenant admins list and revoke anyone's tokens. Platform admins hold platform tokens
(tenant_id NULL), valid for the platform API only.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from uuid import UUID

from platformkit.db.scope import Conn, platform_transaction
from platformkit.ids import uuid7
from platformkit.tokens import InvalidTokenError, TokenFormat, mint_token, parse_token, sha256_hex

from strataplane import errors
from strataplane.actions.access import platform_tx, tenant_tx
from strataplane.actions.context import Ctx, Principal, Services
from strataplane.db import SCOPE
from strataplane.store import tokens, users
from strataplane.store.tokens import ApiToken

TOKEN_FORMAT = TokenFormat.encoded("spk_", nbytes=32, encoding="base32", display_length=4)


@dataclass(frozen=True)
class CreatedToken:
    """The row and the plaintext, which is returned to the caller once and never stored."""

    token: ApiToken
    plaintext: str


async def _mint(
    conn: Conn,
    ctx: Ctx,
    tenant_id: UUID | None,
    name: str,
    roles: list[str] | None,
    expires_at: datetime | None,
) -> CreatedToken:
    if ctx.user_id is None:
        raise errors.AuthRequired("tokens belong to a user")
    if expires_at is not None and expires_at <= datetime.now(UTC):
        raise errors.InvalidInput("expires_at is in the past", field="expires_at")
    minted = mint_token(TOKEN_FORMAT)
    row = await tokens.insert_token(
        conn,
        uuid7(),
        tenant_id=tenant_id,
        user_id=ctx.user_id,
        name=name,
        prefix=minted.display_prefix,
        token_hash=bytes.fromhex(minted.hash),
        roles=sorted(set(roles)) if roles is not None else None,
        expires_at=expires_at,
    )
    return CreatedToken(row, minted.plaintext)


async def create_token(
    ctx: Ctx, name: str, *, roles: list[str] | None = None, expires_at: datetime | None = None
) -> CreatedToken:
    async with tenant_tx(ctx) as tx:
        tx.require_member_with_role()
        held = tx.roles()
        if roles is not None and not set(roles) <= held:
            raise errors.RolesNotHeld(
                "the allowlist names roles you do not hold",
                field="roles",
                not_held=sorted(set(roles) - held),
            )
        created = await _mint(tx.conn, ctx, tx.tenant_id, name, roles, expires_at)
        await tx.audit(
            "token.create",
            "api_token",
            created.token.id,
            {"name": name, "roles": created.token.roles},
        )
    return created


async def list_tokens(ctx: Ctx, *, user_id: UUID | None = None) -> list[ApiToken]:
    """The caller's tokens; a tenant admin may name another user."""
    async with tenant_tx(ctx) as tx:
        tx.require_member_with_role()
        if user_id is not None and user_id != ctx.user_id:
            tx.require("tenant.admin")
        return await tokens.list_tokens(tx.conn, tx.tenant_id, user_id or ctx.user_id)


async def revoke_token(ctx: Ctx, token_id: UUID) -> ApiToken:
    async with tenant_tx(ctx) as tx:
        tx.require_member_with_role()
        token = await tokens.get_token(tx.conn, tx.tenant_id, token_id)
        if token is None:
            raise errors.TokenNotFound()
        if token.user_id != ctx.user_id:
            if not tx.decide("tenant.admin").allowed:
                raise errors.TokenNotFound()  # others' tokens are invisible to non-admins
            tx.require("tenant.admin")
        revoked = await tokens.revoke_token(tx.conn, tx.tenant_id, token_id)
        if revoked is None:
            raise errors.TokenNotFound()
        await tx.audit("token.revoke", "api_token", token_id, {"user_id": str(token.user_id)})
    return revoked


async def create_platform_token(
    ctx: Ctx, name: str, *, expires_at: datetime | None = None
) -> CreatedToken:
    async with platform_tx(ctx) as tx:
        created = await _mint(tx.conn, ctx, None, name, None, expires_at)
        await tx.audit("token.create", "api_token", created.token.id, details={"name": name})
    return created


async def list_platform_tokens(ctx: Ctx) -> list[ApiToken]:
    async with platform_tx(ctx) as tx:
        return await tokens.list_tokens(tx.conn, None, None)


async def revoke_platform_token(ctx: Ctx, token_id: UUID) -> ApiToken:
    async with platform_tx(ctx) as tx:
        revoked = await tokens.revoke_token(tx.conn, None, token_id)
        if revoked is None:
            raise errors.TokenNotFound()
        await tx.audit(
            "token.revoke", "api_token", token_id, details={"user_id": str(revoked.user_id)}
        )
    return revoked


async def authenticate_token(services: Services, candidate: str) -> Principal:
    """The principal behind a bearer token: found by hash in platform scope, before the tenant
    is known. Tenant state and membership are checked by the tenant transaction that follows."""
    try:
        parse_token(TOKEN_FORMAT, candidate)
    except InvalidTokenError:
        raise errors.AuthRequired("malformed API token") from None
    digest = bytes.fromhex(sha256_hex(candidate))
    async with platform_transaction(services.pool, SCOPE) as conn:
        token = await tokens.lookup(conn, digest)
        if token is None or token.revoked_at is not None:
            raise errors.AuthRequired("unknown or revoked API token")
        if token.expires_at is not None and token.expires_at <= datetime.now(UTC):
            raise errors.AuthRequired("expired API token")
        user = await users.get_user(conn, token.user_id)
        if user is None or user.disabled_at is not None:
            raise errors.AuthRequired("the token's user is disabled")
        await tokens.touch(conn, token.id, services.settings.token_touch_seconds)
    return Principal(
        user_id=user.id,
        kind=user.kind,
        display_name=user.display_name,
        platform_admin=user.platform_admin,
        tenant_id=token.tenant_id,
        token_id=token.id,
        token_roles=frozenset(token.roles) if token.roles is not None else None,
    )
