"""The gateway's ASGI application: agent hot paths as plain routes, the rest as FastAPI routes
(including the delivery and task routers), the kernel's middleware, errors, health and metrics.

The lifespan opens what a ``Gateway`` holds: the app-role pool (RLS applies), the deployment
keyring, the signing keys (creating the first one through the owner path if there is none),
the NATS connection (in the background: sends work while NATS is away), the object store, and,
when ``background`` is on, the reconciler, presence and partition loops.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import psycopg
from fastapi import FastAPI
from platformkit import http as http_kernel
from platformkit.http.apidocs import add_api_docs
from platformkit.http.openapi import document_routes_outside_fastapi
from platformkit.jobs import LeaderLoop

from agentbus import db
from agentbus.a2a import api as a2a_api
from agentbus.analytics import api as analytics_api
from agentbus.analytics.ingest import ingest_loop
from agentbus.analytics.store import open_analytics
from agentbus.broker import Broker
from agentbus.console import audit_pages as console_audit
from agentbus.console import live as console_live
from agentbus.console import pages as console_pages
from agentbus.console import policy_pages as console_policies
from agentbus.controllers.audit import AuditJob, audit_loop
from agentbus.controllers.keys import KeyJobs, key_loops
from agentbus.controllers.partitions import partitions_loop
from agentbus.controllers.retention import retention_loops
from agentbus.delivery import api as delivery_api
from agentbus.delivery import trace_api
from agentbus.errors import DatabaseUnavailable
from agentbus.gateway.actions.presence import presence_loop
from agentbus.gateway.actions.reconciler import reconciler_loop
from agentbus.gateway.actions.signing import SigningKeys, ensure_signing_key, keep_fresh
from agentbus.gateway.api import admin as api_admin
from agentbus.gateway.api import audit as api_audit
from agentbus.gateway.api import blobs as api_blobs
from agentbus.gateway.api import invitations as api_invitations
from agentbus.gateway.api import keys as api_keys
from agentbus.gateway.api import management
from agentbus.gateway.api import presence as api_presence
from agentbus.gateway.api import send as api_send
from agentbus.gateway.api import support as api_support
from agentbus.gateway.api.bodies import guard_problem
from agentbus.gateway.api.hot_openapi import hot_paths
from agentbus.gateway.api.response_headers import GatewayHeaders
from agentbus.gateway.config import GatewaySettings
from agentbus.gateway.context import Gateway
from agentbus.gateway.domain.envelope import BATCH_BODY_MAX
from agentbus.gateway.store.objectstore import open_object_store
from agentbus.keys import load_or_create_keyring
from agentbus.policies import api as policies_api
from agentbus.tasks import api as tasks_api
from agentbus.usage import api as usage_api

log = logging.getLogger(__name__)
VERSION = "0.1.0"


# The kernel guard's bounds (04-API-SPEC §1, "Bounds every request meets"): the routes cap their
# own bodies lower still. A batch takes 4 MiB; a blob is bounded by the tenant's plan while it
# streams in (api_blobs). Sends and batches parse their envelopes themselves, answering AB-2xxx
# for one envelope alone, so the guard leaves their JSON to them; usage uploads likewise refuse
# one record alone.
BODY_LIMITS: dict[str, int | None] = {"/v1/messages/batch": BATCH_BODY_MAX, "/v1/blobs": None}
JSON_GUARD_EXEMPT = ("/v1/messages", "/v1/tasks", "/v1/usage")


def _secret(value: object) -> str | None:
    get = getattr(value, "get_secret_value", None)
    return None if get is None else str(get())


def nats_url_of(settings: GatewaySettings) -> str:
    return settings.nats_url or f"nats://127.0.0.1:{settings.nats_port}"


async def open_gateway(settings: GatewaySettings) -> Gateway:
    admin_url = db.resolve_admin_url(_secret(settings.database_url))
    keyring = load_or_create_keyring(settings.resolved_keyring_path)
    async with await psycopg.AsyncConnection.connect(admin_url, autocommit=True) as admin:
        created = await ensure_signing_key(admin, keyring)
    if created:
        log.info("created platform signing key %s", created)
    pool = await db.open_app_pool(admin_url, _secret(settings.app_password))
    signing = SigningKeys(keyring)
    await signing.refresh(pool)
    broker = Broker(
        nats_url_of(settings),
        replicas=settings.stream_replicas,
        publish_timeout=settings.publish_timeout_s,
    )
    await broker.start(wait=3.0)
    objects = open_object_store(
        settings.object_store_url, settings.objects_dir, settings.object_store_timeout_s
    )
    gw = Gateway(settings, pool, keyring, broker, objects, signing)
    gw.analytics = await open_analytics(settings)
    return gw


async def close_gateway(gw: Gateway) -> None:
    if gw.analytics is not None:
        await gw.analytics.close()
    await gw.broker.close()
    await gw.pool.close()


def audit_job(gw: Gateway) -> AuditJob:
    settings = gw.settings
    return AuditJob(gw.pool, gw.broker, gw.signing.signer,
                    checkpoint_interval_s=settings.audit_checkpoint_interval_s,
                    checkpoint_rows=settings.audit_checkpoint_rows)  # fmt: skip


def create_app(settings: GatewaySettings | None = None) -> FastAPI:
    settings = settings or GatewaySettings()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        gw = await open_gateway(settings)
        app.state.gateway = gw
        loops: list[LeaderLoop] = []
        if settings.background:
            loops = [reconciler_loop(gw), presence_loop(gw), partitions_loop(gw.pool),
                     *retention_loops(gw.pool, gw.objects),
                     audit_loop(audit_job(gw), settings.audit_interval_s),
                     *key_loops(KeyJobs(gw.pool, gw.crypto, gw.signing))]  # fmt: skip
            if gw.analytics is not None:
                loops.append(ingest_loop(gw.pool, gw.analytics, settings.analytics_flush_s,
                                         settings.analytics_batch))  # fmt: skip
            for loop in loops:
                await loop.start()
        refresher = asyncio.create_task(
            keep_fresh(gw.signing, gw.pool, settings.signing_refresh_s), name="signing-refresh"
        )
        try:
            yield
        finally:
            refresher.cancel()
            await asyncio.gather(refresher, return_exceptions=True)
            for loop in loops:
                with contextlib.suppress(Exception):
                    await loop.stop()
            await close_gateway(gw)

    app = FastAPI(
        title="AgentBus gateway",
        version=VERSION,
        lifespan=lifespan,
        openapi_url="/v1/openapi.json",
        docs_url=None,  # FastAPI's page loads a CDN; ours is add_api_docs below
        redoc_url=None,
        responses=http_kernel.problem_responses("4XX", "5XX"),
    )
    add_api_docs(app, "/v1/docs")
    app.router.routes.extend(api_send.routes)
    app.router.routes.extend(delivery_api.routes)
    app.router.routes.extend(tasks_api.routes)
    app.router.routes.extend(api_blobs.routes)
    app.router.routes.extend(api_presence.routes)
    app.router.routes.extend(usage_api.routes)
    app.router.routes.extend(a2a_api.routes)
    app.include_router(management.router)
    app.include_router(api_admin.router)
    app.include_router(api_audit.router)
    app.include_router(api_keys.router)
    app.include_router(api_support.router)
    app.include_router(api_invitations.router)
    app.include_router(policies_api.router)
    app.include_router(delivery_api.router)
    app.include_router(trace_api.router)
    app.include_router(analytics_api.router)
    app.include_router(console_pages.router)
    app.include_router(console_live.router)
    app.include_router(console_policies.router)
    app.include_router(console_audit.router)
    app.add_middleware(GatewayHeaders)
    http_kernel.install(
        app,
        readiness_checks={
            "database": http_kernel.pool_check(lambda: app.state.gateway.pool),
            "broker": lambda: _broker_ready(app),
        },
        database_unavailable=lambda: DatabaseUnavailable(
            "PostgreSQL did not answer; retry with backoff"
        ),
        body_limits=BODY_LIMITS,
        json_guard_exempt=JSON_GUARD_EXEMPT,
        guard_problem=guard_problem,
    )
    document_routes_outside_fastapi(app, hot_paths)
    return app


async def _broker_ready(app: FastAPI) -> bool:
    gateway: Gateway = app.state.gateway
    return gateway.broker.connected
