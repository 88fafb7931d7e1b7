"""Building an app: ``create_app`` for FastAPI management APIs, ``install`` for any Starlette app.

``install`` adds, in this order from the outside in: the kernel middleware (request id, metrics,
access log, last-resort 500), the idempotency capture middleware, the problem+json exception
handlers, and the ``/healthz``, ``/readyz`` and ``/metrics`` routes (plain Starlette routes, left
out of OpenAPI). Hot agent paths are plain Starlette apps that call ``install`` themselves.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import psycopg
from fastapi import FastAPI
from prometheus_client import CollectorRegistry
from psycopg_pool import PoolTimeout
from starlette.applications import Starlette

from platformkit.gc_thresholds import tune_for_serving
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
) -> Readiness:
    """Give ``app`` the kernel's middleware, error handling and operational routes.

    Call before the app serves its first request. Returns the readiness registry (also reachable
    through :func:`add_readiness_check`). The process gets the collector thresholds of a
    long-running server (:mod:`platformkit.gc_thresholds`). With ``database_unavailable``, a
    request that finds the database unreachable is answered with that problem (a 503) instead
    of a 500.
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
    **fastapi_options: Any,
) -> FastAPI:
    """A FastAPI app with the kernel installed; other keyword arguments go to ``FastAPI``
    (``lifespan``, ``docs_url``, ``root_path``...)."""
    responses = {**problem_responses("4XX", "5XX"), **fastapi_options.pop("responses", {})}
    app = FastAPI(title=title, version=version, responses=responses, **fastapi_options)
    install(app, readiness_checks=readiness_checks, registry=registry)
    return app
