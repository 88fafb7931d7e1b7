"""The REST API under /api/v1 (FastAPI; OpenAPI at /api/v1/openapi.json).

Authentication is the dashboard's session cookie (see ``z4j.actions.sessions``); agents have
their own channel at /ws/agent and never call this API.
"""

from fastapi import APIRouter

from z4j.api.v1 import agents, auth, members, projects, stream, tasks

router = APIRouter(prefix="/api/v1")
for module in (auth, projects, members, agents, tasks, stream):
    router.include_router(module.router)

__all__ = ["router"]
