"""Prometheus metrics: request count and latency by method, route template and status.

Labels use the route's template (``/v1/hosts/{host_id}``), never the raw path, and fold unknown
methods into ``other`` and unrouted requests into ``unmatched``, so the number of series stays
bounded whatever clients send. A system registers its own metrics in the same registry (the
process default unless it passes one to ``create_app``).

Several granian workers are several processes. When ``PROMETHEUS_MULTIPROC_DIR`` is set (which
:func:`platformkit.http.serve` does whenever it starts more than one worker) prometheus-client's
multiprocess mode is used: each worker writes its samples to memory-mapped files there and
``/metrics``, whichever worker answers it, adds up all workers' files. Otherwise the registry of
the one process is exported as it is.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Iterable, Iterator
from weakref import WeakKeyDictionary, finalize

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    Counter,
    Histogram,
    generate_latest,
)
from prometheus_client.multiprocess import MultiProcessCollector
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Scope

__all__ = ["HttpMetrics", "http_metrics", "metrics_endpoint", "route_template"]

LABELS = ("method", "route", "status")
METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
BUCKETS = (0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
UNMATCHED = "unmatched"


class HttpMetrics:
    """The kernel's two HTTP metrics, registered once in one registry."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.requests = Counter(
            "http_requests",
            "HTTP requests answered, by method, route template and status",
            LABELS,
            registry=registry,
        )
        self.duration = Histogram(
            "http_request_duration_seconds",
            "Time from request start to the end of the response, by method, route and status",
            LABELS,
            registry=registry,
            buckets=BUCKETS,
        )

    def observe(self, method: str, route: str, status: int, seconds: float) -> None:
        labels = (method if method in METHODS else "other", route, str(status))
        self.requests.labels(*labels).inc()
        self.duration.labels(*labels).observe(seconds)


_by_registry: WeakKeyDictionary[CollectorRegistry, HttpMetrics] = WeakKeyDictionary()


def http_metrics(registry: CollectorRegistry | None = None) -> HttpMetrics:
    """The HTTP metrics of ``registry`` (created on first use, so several apps can share it)."""
    registry = REGISTRY if registry is None else registry
    if registry not in _by_registry:
        _by_registry[registry] = HttpMetrics(registry)
    return _by_registry[registry]


def _matched_route(scope: Scope) -> tuple[object | None, str]:
    """The route that handled ``scope`` and the prefix of the routers it was included through."""
    route: object | None = scope.get("route")
    if route is not None or "endpoint" not in scope:
        return route, ""
    # FastAPI's router records only its own APIRoutes; a plain Route or a Mount added to a
    # FastAPI app, or to a router it includes, is found by the endpoint routing stored (identity
    # checks, no re-matching), and by its path where one endpoint serves several routes.
    found = _serving(scope.get("router"), scope["endpoint"])
    if len(found) > 1:
        path = str(scope.get("path", ""))[len(str(scope.get("root_path", ""))) :]
        found = [(r, prefix) for r, prefix in found if _matches(r, prefix, path)] or found
    return found[0] if found else (None, "")


Found = list[tuple[object, str]]
_found: dict[int, tuple[int, dict[object, Found]]] = {}
"""id(router) -> (its number of routes, endpoint -> the routes serving it); an entry goes with
its router (FastAPI's routers cannot be hashed, so they are keys by id, dropped on collection)."""


def _serving(router: object, endpoint: object) -> Found:
    """The routes under ``router`` that serve ``endpoint``, with their prefixes: looked up once
    per router and endpoint (a walk of every route, included routers too, costs tens of
    microseconds a request), and again when the router's own list of routes changes length."""
    routes = getattr(router, "routes", ())
    try:
        entry = _found.get(id(router))
        if entry is None or entry[0] != len(routes):
            if entry is None:
                finalize(router, _found.pop, id(router), None)
            entry = _found[id(router)] = (len(routes), {})
        known = entry[1]
        if endpoint not in known:
            known[endpoint] = list(_by_endpoint(routes, endpoint, ""))
        return known[endpoint]
    except TypeError:  # no router, or one or an endpoint that cannot be a key
        return list(_by_endpoint(routes, endpoint, ""))


def _by_endpoint(
    routes: Iterable[object], endpoint: object, prefix: str
) -> Iterator[tuple[object, str]]:
    for candidate in routes:
        included = getattr(candidate, "original_router", None)  # FastAPI's include_router
        if included is not None:
            context = getattr(candidate, "include_context", None)
            inner = prefix + str(getattr(context, "prefix", "") or "")
            yield from _by_endpoint(getattr(included, "routes", ()), endpoint, inner)
        elif getattr(candidate, "endpoint", None) is endpoint or (
            getattr(candidate, "app", None) is endpoint and hasattr(candidate, "routes")
        ):
            yield candidate, prefix


def _matches(route: object, prefix: str, path: str) -> bool:
    regex = getattr(route, "path_regex", None)
    return path.startswith(prefix) and regex is not None and bool(regex.match(path[len(prefix) :]))


def route_template(scope: Scope, outer_root_path: str = "") -> str:
    """The template of the route that handled ``scope``, prefixed by the mounts it went through.

    Read after the router ran: routing records the matched route (or at least its endpoint) in
    the scope and grows ``root_path`` by each mount's matched prefix.
    """
    route, included_prefix = _matched_route(scope)
    path = getattr(route, "path", None)
    if not isinstance(path, str):
        return UNMATCHED
    prefix = str(scope.get("root_path", ""))[len(outer_root_path) :] + included_prefix
    if hasattr(route, "routes") and not hasattr(route, "endpoint"):
        return prefix + "/{path}"  # the innermost match is a mounted app with its own paths
    return prefix + path


def _exposition(registry: CollectorRegistry) -> bytes:
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        merged = CollectorRegistry()
        MultiProcessCollector(merged)  # type: ignore[no-untyped-call]  # untyped upstream
        return generate_latest(merged)
    return generate_latest(registry)


def metrics_endpoint(
    registry: CollectorRegistry | None = None,
) -> Callable[[Request], Awaitable[Response]]:
    """A Starlette endpoint serving ``registry`` in the Prometheus text format."""
    source = REGISTRY if registry is None else registry

    async def metrics(request: Request) -> Response:
        body = await run_in_threadpool(_exposition, source)
        return Response(body, media_type=CONTENT_TYPE_LATEST)

    return metrics
