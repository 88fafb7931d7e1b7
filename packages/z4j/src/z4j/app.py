"""The brain's ASGI application: agent channel, REST API, dashboard, background loops."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial

from fastapi import FastAPI
from platformkit import http as http_kernel
from platformkit.http.apidocs import add_api_docs
from platformkit.http.openapi import document_routes_outside_fastapi
from starlette.routing import WebSocketRoute
from starlette.staticfiles import StaticFiles
from z4j_agent.protocol import MAX_FRAME_BYTES

from z4j import __version__, console, db
from z4j.api import agent_http, v1
from z4j.api.agent_openapi import agent_paths
from z4j.api.agent_ws import agent_websocket
from z4j.api.v1 import errors
from z4j.api.v1.middleware import AuthMiddleware
from z4j.console.render import STATIC, error_page
from z4j.controllers.alerts import alerts_loop
from z4j.controllers.changes import relay_changes
from z4j.controllers.commands import run_commands
from z4j.controllers.liveness import run_liveness_sweeper
from z4j.controllers.lost import lost_tasks_loop
from z4j.controllers.retention import run_retention
from z4j.settings import Settings
from z4j.startup import open_brain, prepare

# The agent channel's HTTP fallback answers a frame it cannot parse (oversize, too deep) itself,
# in the agent protocol's terms (a signed ack or error frame), and isolates the bad events of a
# batch: the guard leaves its bodies to it, bounding them only at twice the frame size.
AGENT_HTTP = "/api/v1/agent/"
BODY_LIMITS = {AGENT_HTTP: 2 * MAX_FRAME_BYTES}


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or Settings()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        prepared = await prepare(settings)
        brain = await open_brain(prepared)
        app.state.brain = brain
        app_url = db.app_url(prepared.admin_url, prepared.secrets)
        async with (
            run_liveness_sweeper(brain),
            relay_changes(brain, app_url),
            lost_tasks_loop(brain, app_url),
            run_commands(brain, app_url),
            run_retention(brain),
            alerts_loop(brain, app_url),
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
        docs_url=None,  # FastAPI's page loads a CDN; ours is add_api_docs below
        redoc_url=None,
        responses=http_kernel.problem_responses("4XX", "5XX"),
    )
    app.router.routes.append(WebSocketRoute("/ws/agent", agent_websocket))
    app.router.routes.extend(agent_http.routes)
    app.include_router(v1.router)
    app.include_router(console.router)
    add_api_docs(app, "/api/v1/docs")
    app.mount("/static", StaticFiles(directory=STATIC), name="static")
    # problem+json for the API, the error page for the dashboard's pages
    respond = partial(errors.respond, html=error_page)
    # Added before the kernel's, so it runs inside them (request id, access log, last-resort 500).
    app.add_middleware(AuthMiddleware, render_error=respond)
    http_kernel.install(
        app,
        readiness_checks={"database": http_kernel.pool_check(lambda: app.state.brain.pool)},
        body_limits=BODY_LIMITS,
        json_guard_exempt=[AGENT_HTTP],
        guard_render=respond,
    )
    errors.install(app, html=error_page)
    document_routes_outside_fastapi(app, agent_paths)
    return app
