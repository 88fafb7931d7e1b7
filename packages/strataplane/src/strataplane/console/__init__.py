"""The console: server-rendered pages over the same actions and reads as the API
(docs/strataplane/console.md)."""

from fastapi import APIRouter

from strataplane.console import (
    admin,
    audit,
    change_sets,
    editing,
    fleet,
    platform,
    rollouts,
    signin,
    spec,
)

router = APIRouter(include_in_schema=False)
for module in (signin, fleet, spec, editing, change_sets, rollouts, audit, admin, platform):
    router.include_router(module.router)

__all__ = ["router"]
