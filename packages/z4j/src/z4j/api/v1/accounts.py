"""Accounts for brain administrators: list, disable, enable."""

from __future__ import annotations

import uuid

from fastapi import APIRouter

from z4j.actions import accounts
from z4j.api.v1.account_schemas import AccountOut
from z4j.api.v1.deps import CtxDep

router = APIRouter(tags=["users"])


@router.get("/users", summary="Every account (brain administrators)")
async def list_users(ctx: CtxDep) -> list[AccountOut]:
    return [AccountOut.model_validate(r) for r in await accounts.list_users(ctx)]


@router.post(
    "/users/{user_id}/disable",
    summary="Disable an account: no sign-in; its sessions and API keys stop at once",
)
async def disable(user_id: uuid.UUID, ctx: CtxDep) -> AccountOut:
    return AccountOut.model_validate(await accounts.set_active(ctx, user_id, False))


@router.post("/users/{user_id}/enable", summary="Enable a disabled account again")
async def enable(user_id: uuid.UUID, ctx: CtxDep) -> AccountOut:
    return AccountOut.model_validate(await accounts.set_active(ctx, user_id, True))
