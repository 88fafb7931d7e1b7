"""The dashboard: server-rendered pages over the same actions and reads as the API."""

from fastapi import APIRouter

from z4j.console import (
    account,
    accounts,
    agents,
    alerts,
    api_keys,
    audit,
    auth_pages,
    commands,
    members,
    projects,
    schedules,
    tasks,
    trends,
)

router = APIRouter(include_in_schema=False)
for module in (
    auth_pages,
    account,
    accounts,
    api_keys,
    audit,
    projects,
    members,
    tasks,
    commands,
    schedules,
    agents,
    trends,
    alerts,
):
    router.include_router(module.router)

__all__ = ["router"]
