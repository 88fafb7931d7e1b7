"""The brain's ASGI application: agent channel, REST API, dashboard, background loops."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial

from fastapi import FastAPI
from platformkit import http as http_kernel
from starlette.routing import WebSocketRoute
from starlette.staticfiles import StaticFiles
from z4j_agent.protocol import MAX_FRAME_BYTES

from z4j import __version__, console, db
from z4j.api import agent_http, v1
from z4j.api.agent_ws import agent_websocket
from z4j.api.v1 import errors
from z4j.api.v1.middleware import AuthMiddleware
from z4j.console.render import STATIC, error_page
from z4j.controllers.changes import relay_changes
from z4j.controllers.liveness import run_liveness_sweeper
from z4j.settings import Settings
from z4j.startup import open_brain, prepare

# The agent channel's HTTP fallback answers an oversize frame itself, in the agent protocol's
# terms (400 with its close code), and isolates the bad events of a batch: the guard leaves its
# bodies to it, bounding them only at twice the frame size.
AGENT_HTTP = "/api/v1/agent/"
BODY_LIMITS = {AGENT_HTTP: 2 * MAX_FRAME_BYTES}


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or Settings()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        prepared = await prepare(settings)
        brain = await open_brain(prepared)
        app.state.brain = brain
        async with (
            run_liveness_sweeper(brain),
            relay_changes(brain, db.app_url(prepared.admin_url, prepared.secrets)),
        ):
            try:
                yield
            finally:
                await brain.pool.close()

    app = FastAPI(
        title="z4j brain",
        version=__version__,
        lifespan=lifespan,
        openapi_url="/api/v1/openapi.json",
        # The interactive docs page loads its scripts from a CDN; serve the schema only.
        docs_url=None,
        redoc_url=None,
        responses=http_kernel.problem_responses("4XX", "5XX"),
    )
    app.router.routes.append(WebSocketRoute("/ws/agent", agent_websocket))
    app.router.routes.extend(agent_http.routes)
    app.include_router(v1.router)
    app.include_router(console.router)
    app.mount("/static", StaticFiles(directory=STATIC), name="static")
    # Added before the kernel's, so it runs inside them (request id, access log, last-resort 500).
    app.add_middleware(AuthMiddleware, render_error=partial(errors.respond, html=error_page))
    http_kernel.install(
        app,
        readiness_checks={"database": http_kernel.pool_check(lambda: app.state.brain.pool)},
        body_limits=BODY_LIMITS,
        json_guard_exempt=[AGENT_HTTP],
    )
    errors.install(app, html=error_page)
    return app
