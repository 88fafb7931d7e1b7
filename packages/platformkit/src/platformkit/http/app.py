"""Building an app: ``create_app`` for FastAPI management APIs, ``install`` for any Starlette app.

``install`` adds, in this order from the outside in: the kernel middleware (request id, metrics,
access log, last-resort 500), the request guard (body limits, bounded and storable JSON, path
and query text), the idempotency capture middleware, the problem+json exception
handlers, and the ``/healthz``, ``/readyz`` and ``/metrics`` routes (plain Starlette routes, left
out of OpenAPI). Hot agent paths are plain Starlette apps that call ``install`` themselves.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

import psycopg
from fastapi import FastAPI
from prometheus_client import CollectorRegistry
from psycopg_pool import PoolTimeout
from starlette.applications import Starlette

from platformkit.gc_thresholds import tune_for_serving
from platformkit.http.guard import DEFAULT_BODY_LIMIT, ProblemHook, ProblemRenderer, RequestGuard
from platformkit.http.handlers import database_outage_handler, exception_handlers
from platformkit.http.health import Readiness, ReadinessCheck, healthz
from platformkit.http.idempotency.capture import IdempotencyMiddleware
from platformkit.http.metrics import http_metrics, metrics_endpoint
from platformkit.http.middleware import KernelMiddleware
from platformkit.http.openapi import problem_responses
from platformkit.http.problems import ProblemError

__all__ = ["add_readiness_check", "create_app", "install"]

_STATE_KEY = "platformkit_readiness"


def install(
    app: Starlette,
    *,
    readiness_checks: Mapping[str, ReadinessCheck] | None = None,
    registry: CollectorRegistry | None = None,
    readiness_timeout: float = 2.0,
    database_unavailable: Callable[[], ProblemError] | None = None,
    body_limit: int = DEFAULT_BODY_LIMIT,
    body_limits: Mapping[str, int | None] | None = None,
    json_guard_exempt: Iterable[str] = (),
    guard_problem: ProblemHook | None = None,
    guard_render: ProblemRenderer | None = None,
) -> Readiness:
    """Give ``app`` the kernel's middleware, error handling and operational routes.

    Call before the app serves its first request. Returns the readiness registry (also reachable
    through :func:`add_readiness_check`). The process gets the collector thresholds of a
    long-running server (:mod:`platformkit.gc_thresholds`). With ``database_unavailable``, a
    request that finds the database unreachable is answered with that problem (a 503) instead
    of a 500.

    The request guard (:mod:`platformkit.http.guard`) bounds every body to ``body_limit``, or
    to the longest matching prefix's entry in ``body_limits``; JSON and form bodies outside the
    ``json_guard_exempt`` prefixes, and every path and query, are refused with a 422 naming
    the field when PostgreSQL could not store them. ``guard_problem`` turns the guard's
    problems into the system's own, and ``guard_render`` answers them (an HTML error page for
    a dashboard's pages) instead of problem+json.
    """
    tune_for_serving()
    readiness = Readiness(readiness_checks, timeout=readiness_timeout)
    setattr(app.state, _STATE_KEY, readiness)
    for exc_class, handler in exception_handlers().items():
        app.add_exception_handler(exc_class, handler)
    if database_unavailable is not None:
        outage = database_outage_handler(database_unavailable)
        app.add_exception_handler(psycopg.OperationalError, outage)
        app.add_exception_handler(PoolTimeout, outage)
    # add_middleware puts each new middleware outside the ones added before.
    app.add_middleware(IdempotencyMiddleware)
    app.add_middleware(
        RequestGuard,
        body_limit=body_limit,
        body_limits=body_limits,
        json_guard_exempt=tuple(json_guard_exempt),
        problem=guard_problem,
        render=guard_render,
        router=app.router,
    )
    app.add_middleware(KernelMiddleware, metrics=http_metrics(registry))
    app.add_route("/healthz", healthz, methods=["GET"], include_in_schema=False)
    app.add_route("/readyz", readiness.endpoint, methods=["GET"], include_in_schema=False)
    app.add_route("/metrics", metrics_endpoint(registry), methods=["GET"], include_in_schema=False)
    return readiness


def add_readiness_check(app: Starlette, name: str, check: ReadinessCheck) -> None:
    """Register a check after creation, e.g. in the lifespan once the pool is open."""
    readiness = getattr(app.state, _STATE_KEY, None)
    if not isinstance(readiness, Readiness):
        raise RuntimeError("platformkit.http.install() has not been applied to this app")
    readiness.add(name, check)


def create_app(
    *,
    title: str,
    version: str,
    readiness_checks: Mapping[str, ReadinessCheck] | None = None,
    registry: CollectorRegistry | None = None,
    body_limit: int = DEFAULT_BODY_LIMIT,
    body_limits: Mapping[str, int | None] | None = None,
    json_guard_exempt: Iterable[str] = (),
    **fastapi_options: Any,
) -> FastAPI:
    """A FastAPI app with the kernel installed; other keyword arguments go to ``FastAPI``
    (``lifespan``, ``docs_url``, ``root_path``...)."""
    responses = {**problem_responses("4XX", "5XX"), **fastapi_options.pop("responses", {})}
    app = FastAPI(title=title, version=version, responses=responses, **fastapi_options)
    install(
        app,
        readiness_checks=readiness_checks,
        registry=registry,
        body_limit=body_limit,
        body_limits=body_limits,
        json_guard_exempt=json_guard_exempt,
    )
    return app
