"""The management API, version 1 (OpenAPI at /api/v1/openapi.json)."""

from fastapi import APIRouter

from strataplane.api.v1 import (
    audit,
    auth,
    bindings,
    members,
    platform,
    service_accounts,
    teams,
    tokens,
)

router = APIRouter(prefix="/api/v1")
for module in (auth, platform, members, teams, service_accounts, bindings, tokens, audit):
    router.include_router(module.router)

__all__ = ["router"]
