"""The dashboard: server-rendered pages over the same actions and reads as the API."""

from fastapi import APIRouter

from z4j.console import agents, auth_pages, members, projects, tasks

router = APIRouter(include_in_schema=False)
for module in (auth_pages, projects, members, tasks, agents):
    router.include_router(module.router)

__all__ = ["router"]
