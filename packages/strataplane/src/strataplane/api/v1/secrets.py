"""Secrets: metadata and versions, never values (docs/strataplane/secrets.md)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated
from uuid import UUID

from fastapi import APIRouter, Depends, Path, Response
from platformkit.storable import PgBigInt
from pydantic import Field

from strataplane.actions import secrets
from strataplane.api.deps import TenantCtx, idempotency_key
from strataplane.api.v1.common import Model, PageLimit

router = APIRouter(prefix="/api/v1/secrets", tags=["secrets"])

Name = Annotated[
    str, Path(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9_]+$", description="Secret name.")
]
Version = Annotated[int, Path(ge=1, le=2**31 - 1, description="A version of the Secret.")]


class SecretValueIn(Model):
    value: str = Field(
        min_length=1,
        max_length=secrets.MAX_VALUE,
        description="The value; write-only: no answer ever returns it.",
    )
    comment: str | None = Field(None, max_length=secrets.MAX_COMMENT)
    rotate: bool = Field(
        False, description="Refuse (409 secret.no_value) unless the Secret already has a version."
    )


class SecretVersionOut(Model):
    version: int
    comment: str | None
    created_by: UUID | None
    created_at: datetime
    disabled_at: datetime | None


class SecretOut(Model):
    name: str
    in_spec: bool = Field(description="The Secret object exists at the latest revision.")
    owner: str | None
    min_assurance: str | None
    current_version: int | None = Field(description="The newest version not disabled.")
    versions: int
    updated_at: datetime | None


class SecretDetailOut(SecretOut):
    history: list[SecretVersionOut]


class DeliveryOut(Model):
    id: int
    version: int
    agent_instance_id: UUID
    channel: str
    assurance: str
    identity_subject: str | None
    ts: datetime


@router.get("")
async def list_secrets(ctx: TenantCtx) -> list[SecretOut]:
    return [SecretOut.model_validate(s) for s in await secrets.list_secrets(ctx)]


@router.get("/{name}")
async def get_secret(ctx: TenantCtx, name: Name) -> SecretDetailOut:
    info, versions = await secrets.access_secret(ctx, name)
    return SecretDetailOut(
        **SecretOut.model_validate(info).model_dump(),
        history=[SecretVersionOut.model_validate(v) for v in versions],
    )


@router.post("/{name}/versions", status_code=201, dependencies=[Depends(idempotency_key)])
async def write_secret_version(
    ctx: TenantCtx, name: Name, body: SecretValueIn, response: Response
) -> SecretVersionOut:
    """Write a new version; it becomes current and referring agents reload to fetch it."""
    row = await secrets.set_secret(ctx, name, body.value, comment=body.comment, rotate=body.rotate)
    response.headers["Location"] = f"/api/v1/secrets/{name}"
    return SecretVersionOut.model_validate(row)


@router.post("/{name}/versions/{version}/disable", status_code=204)
async def disable_secret_version(ctx: TenantCtx, name: Name, version: Version) -> None:
    await secrets.set_version_disabled(ctx, name, version, disabled=True)


@router.post("/{name}/versions/{version}/enable", status_code=204)
async def enable_secret_version(ctx: TenantCtx, name: Name, version: Version) -> None:
    await secrets.set_version_disabled(ctx, name, version, disabled=False)


@router.delete("/{name}/versions/{version}", status_code=204)
async def delete_secret_version(ctx: TenantCtx, name: Name, version: Version) -> None:
    """Delete a disabled version and its sealed value."""
    await secrets.delete_secret(ctx, name, version)


@router.delete("/{name}", status_code=204)
async def delete_secret(ctx: TenantCtx, name: Name) -> None:
    """Delete every version of a name the latest revision no longer has."""
    await secrets.delete_secret(ctx, name)


@router.get("/{name}/deliveries")
async def list_deliveries(
    ctx: TenantCtx, name: Name, before: PgBigInt | None = None, limit: PageLimit = 100
) -> list[DeliveryOut]:
    found = await secrets.list_deliveries(ctx, name, before=before, limit=limit)
    return [DeliveryOut.model_validate(d) for d in found]
