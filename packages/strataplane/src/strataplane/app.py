"""The server's ASGI application: the management API, operations' job runner, health.

``create_app()`` is the granian factory (settings from the environment); tests pass settings
and a fast password policy. The database must already be migrated (``strataplane migrate``,
or ``strataplane serve``, which migrates before it starts the workers).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles
from platformkit.db.pool import open_pool
from platformkit.db.scope import transaction
from platformkit.http import (
    Idempotency,
    ProblemError,
    add_readiness_check,
    install,
    pool_check,
    problem_responses,
    rls_scope,
)
from platformkit.http.apidocs import add_api_docs
from platformkit.http.metrics import http_metrics
from platformkit.http.openapi import operational_paths
from platformkit.jobs import JobRunner
from platformkit.passwords import DEFAULT_POLICY, PasswordPolicy
from starlette.types import Receive, Scope, Send

from strataplane import __version__, db
from strataplane.actions import catalog, jobs, secrets
from strataplane.actions.context import Services
from strataplane.agents import elastic, telegraf, telegraf_secrets, vector
from strataplane.agents.front import AgentFront
from strataplane.agents.openapi import agent_paths
from strataplane.agents.runtime import start_fleet
from strataplane.api import v1
from strataplane.api.v1 import audit_sinks as audit_sinks_api
from strataplane.api.v1 import fleet as fleet_api
from strataplane.api.v1 import secrets as secrets_api
from strataplane.api.v1 import trust_anchors as trust_anchors_api
from strataplane.console import router as console_router
from strataplane.console.render import STATIC, STATIC_PATH, error_page
from strataplane.controllers.audit_sinks import AuditExporter
from strataplane.settings import Settings
from strataplane.store import tenants

# Routes that document more than the kernel's 1 MiB: a spec file is up to 1 MiB canonical, sent
# as a JSON string (escapes make it longer), and a rebase or revert resolves several files.
SPEC_BODY_MAX = 4 << 20
BODY_LIMITS = {
    "/api/v1/change-sets/{ref}/files/": SPEC_BODY_MAX,
    "/api/v1/change-sets/{ref}/rebase": SPEC_BODY_MAX,
    "/api/v1/change-sets/revert": SPEC_BODY_MAX,
}


def _secret(value: object) -> str | None:
    getter = getattr(value, "get_secret_value", None)
    return getter() if getter is not None else None


class StrataplaneApp(FastAPI):
    """The management API (platformkit's kernel installed), with the agents' endpoints
    answered ahead of FastAPI's per-request work and every middleware (agents/front.py)."""

    front: AgentFront

    def openapi(self) -> dict[str, Any]:
        """FastAPI's document with the routes FastAPI does not route: the agents' endpoints
        and the kernel's operational ones."""
        if self.openapi_schema is not None:
            return self.openapi_schema
        document = super().openapi()  # kept by FastAPI as openapi_schema: updated in place
        document["paths"].update(agent_paths(document.setdefault("components", {})))
        document["paths"].update(telegraf_secrets.openapi_paths())
        document["paths"].update(operational_paths())
        return document

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        endpoint = self.front.route(scope)
        if endpoint is None:
            await super().__call__(scope, receive, send)
        else:
            await self.front.serve(endpoint, scope, receive, send)


def create_app(
    settings: Settings | None = None, *, password_policy: PasswordPolicy = DEFAULT_POLICY
) -> StrataplaneApp:
    settings = settings or Settings()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        admin_url = db.resolve_admin_url(_secret(settings.database_url))
        url = db.app_url(admin_url, _secret(settings.database_app_password))
        # The job runner borrows a connection per running task, beside the requests' ones.
        size = settings.pool_size + settings.job_concurrency
        pool = await open_pool(url, min_size=2, max_size=size, name="strataplane")
        services = Services(pool, settings, password_policy=password_policy)
        try:
            async with transaction(pool) as conn:
                shards = await tenants.ensure_installation(conn, settings.shards)
            await catalog.ensure_shipped(pool, settings)
            await secrets.keyring(services)  # a keyring that is not this database's stops here
            exporter = AuditExporter(
                pool,
                lambda: secrets.keyring(services),
                interval=settings.audit_export_interval,
                batch=settings.audit_export_batch,
            )
            runner = JobRunner(
                pool, db.QUEUE, jobs.tasks(pool), concurrency=settings.job_concurrency
            )
            await runner.start()
            services.jobs = runner
            app.state.services = services
            fleet = await start_fleet(app, pool, shards)
            await exporter.start()
            try:
                yield
            finally:
                await exporter.stop()
                await fleet.stop()
                await runner.stop()
        finally:
            await pool.close()

    app = StrataplaneApp(
        title="strataplane",
        version=__version__,
        lifespan=lifespan,
        openapi_url="/api/v1/openapi.json",
        docs_url=None,  # FastAPI's page loads a CDN; ours is add_api_docs below
        redoc_url=None,
        responses=problem_responses("4XX", "5XX"),
    )
    install(app, body_limits=BODY_LIMITS)
    add_api_docs(app, "/api/v1/docs")
    endpoints = {
        **telegraf.ENDPOINTS,
        **telegraf_secrets.endpoints(app.state),
        **vector.endpoints(app.state),
        **elastic.ENDPOINTS,
    }
    app.front = AgentFront(app.state, endpoints, http_metrics())
    app.state.idempotency = Idempotency(
        lambda: app.state.services.pool,
        table=f"{db.SCHEMA}.idempotency_key",
        scope=rls_scope(db.SCOPE),
    )
    app.include_router(v1.router)
    app.include_router(fleet_api.router)
    app.include_router(secrets_api.router)
    app.include_router(trust_anchors_api.router)
    app.include_router(audit_sinks_api.router)
    app.include_router(console_router)
    app.mount(STATIC_PATH, StaticFiles(directory=STATIC), name="console-static")
    app.add_exception_handler(ProblemError, error_page)  # pages for the console, else problems
    add_readiness_check(app, "database", pool_check(lambda: app.state.services.pool))
    return app
