"""The REST API under /api/v1 (FastAPI; OpenAPI at /api/v1/openapi.json).

Authentication is the dashboard's session cookie (see ``z4j.actions.sessions``) or an API key
as ``Authorization: Bearer`` (``z4j.actions.api_keys``); agents have their own channel at
/ws/agent, and call this API only for the beat scheduler's ``/agent/schedules`` routes, with
their own token (``agent_schedules``).
"""

from fastapi import APIRouter

from z4j.api.v1 import (
    account,
    accounts,
    agent_schedules,
    agents,
    alerts,
    api_keys,
    audit,
    auth,
    commands,
    members,
    mfa,
    projects,
    retention,
    schedules,
    stream,
    tasks,
    trends,
)

router = APIRouter(prefix="/api/v1")
MODULES = (
    auth,
    account,
    accounts,
    api_keys,
    audit,
    mfa,
    projects,
    members,
    retention,
    agents,
    tasks,
    commands,
    schedules,
    agent_schedules,
    trends,
    alerts,
    stream,
)
for module in MODULES:
    router.include_router(module.router)

__all__ = ["router"]
