"""The management API, version 1 (OpenAPI at /api/v1/openapi.json)."""

from fastapi import APIRouter

from strataplane.api.v1 import (
    audit,
    auth,
    bindings,
    change_sets,
    invitations,
    members,
    oidc,
    platform,
    service_accounts,
    spec,
    teams,
    tokens,
)

router = APIRouter(prefix="/api/v1")
for module in (
    auth,
    oidc,
    platform,
    members,
    invitations,
    teams,
    service_accounts,
    bindings,
    tokens,
    audit,
    spec,
):
    router.include_router(module.router)
router.include_router(change_sets.router)
router.include_router(change_sets.operations_router)

__all__ = ["router"]
