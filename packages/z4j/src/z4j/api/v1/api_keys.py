"""The caller's API keys: create (shown once), list, revoke."""

from __future__ import annotations

import uuid

from fastapi import APIRouter, status

from z4j.actions import api_keys
from z4j.api.v1.account_schemas import ApiKeyCreated, ApiKeyIn, ApiKeyOut
from z4j.api.v1.deps import CtxDep

router = APIRouter(tags=["api keys"])


@router.get("/api-keys", summary="The caller's API keys in every project")
async def list_keys(ctx: CtxDep) -> list[ApiKeyOut]:
    return [ApiKeyOut.model_validate(k) for k in await api_keys.list_keys(ctx)]


@router.post(
    "/api-keys",
    status_code=status.HTTP_201_CREATED,
    summary="Create a key for one project with a role up to the caller's; the token shows once",
)
async def create_key(body: ApiKeyIn, ctx: CtxDep) -> ApiKeyCreated:
    created = await api_keys.create_key(ctx, body.project_id, body.name, body.role.value)
    return ApiKeyCreated(key=ApiKeyOut.model_validate(created.key), token=created.token)


@router.delete(
    "/api-keys/{key_id}",
    status_code=status.HTTP_204_NO_CONTENT,
    summary="Revoke a key; it stops working at once",
)
async def revoke_key(key_id: uuid.UUID, ctx: CtxDep) -> None:
    await api_keys.revoke_key(ctx, key_id)
