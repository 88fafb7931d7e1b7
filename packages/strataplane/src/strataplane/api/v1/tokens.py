"""API tokens of the caller (and, for tenant admins, of others). Creating a token returns it
once and takes no Idempotency-Key: no stored response may hold a credential."""

from __future__ import annotations

from datetime import datetime
from typing import Self
from uuid import UUID

from fastapi import APIRouter, Depends
from platformkit.http import no_idempotency_key
from pydantic import Field

from strataplane.actions import tokens
from strataplane.actions.tokens import CreatedToken
from strataplane.api.deps import TenantCtx
from strataplane.api.v1.common import Model, RoleName

router = APIRouter(prefix="/tokens", tags=["tokens"])


class TokenIn(Model):
    name: str = Field(min_length=1, max_length=200)
    roles: list[RoleName] | None = Field(
        None, description="Allowlist: the token acts with at most these of your roles."
    )
    expires_at: datetime | None = None


class TokenOut(Model):
    id: UUID
    tenant_id: UUID | None
    name: str
    token_prefix: str
    user_id: UUID
    roles: list[str] | None
    expires_at: datetime | None
    last_used_at: datetime | None
    created_at: datetime
    revoked_at: datetime | None


class CreatedTokenOut(TokenOut):
    token: str = Field(description="The token itself, shown only in this response.")

    @classmethod
    def of(cls, created: CreatedToken) -> Self:
        base = TokenOut.model_validate(created.token).model_dump()
        return cls(**base, token=created.plaintext)


@router.post("", status_code=201, dependencies=[Depends(no_idempotency_key)])
async def create_token(ctx: TenantCtx, body: TokenIn) -> CreatedTokenOut:
    roles = [str(r) for r in body.roles] if body.roles is not None else None
    created = await tokens.create_token(ctx, body.name, roles=roles, expires_at=body.expires_at)
    return CreatedTokenOut.of(created)


@router.get("")
async def list_tokens(ctx: TenantCtx, user_id: UUID | None = None) -> list[TokenOut]:
    return [TokenOut.model_validate(t) for t in await tokens.list_tokens(ctx, user_id=user_id)]


@router.delete("/{token_id}")
async def revoke_token(ctx: TenantCtx, token_id: UUID) -> TokenOut:
    return TokenOut.model_validate(await tokens.revoke_token(ctx, token_id))
