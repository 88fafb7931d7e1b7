"""The kernel middleware: request id, timing, metrics, access log, and the last-resort 500.

A plain ASGI middleware (no ``BaseHTTPMiddleware``: it would add a task per request and break
contextvars), outermost among user middleware, so it sees every response including the problem
responses rendered by the exception handlers inside it. An exception that nothing handled is
logged here with its traceback and the request id, and the client gets a problem with code
``internal`` and no trace of the exception itself.
"""

from __future__ import annotations

import logging
import time

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from platformkit.http.metrics import HttpMetrics, route_template
from platformkit.http.problems import InternalError, problem_response
from platformkit.http.requestid import (
    HEADER,
    accept_request_id,
    bind_request_id,
    unbind_request_id,
)

__all__ = ["KernelMiddleware"]

log = logging.getLogger("platformkit.http")
access_log = logging.getLogger("platformkit.http.access")

_HEADER_KEY = HEADER.lower().encode()
# Probes and scrapes arrive every few seconds; their access lines are debug-level noise.
QUIET_ROUTES = frozenset({"/healthz", "/readyz", "/metrics"})
NO_RESPONSE = 499  # the client went away before any response was started


class KernelMiddleware:
    def __init__(self, app: ASGIApp, *, metrics: HttpMetrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        incoming = None
        for name, value in scope.get("headers", ()):
            if name == _HEADER_KEY:
                incoming = value.decode("latin-1")
                break
        request_id = accept_request_id(incoming)
        token = bind_request_id(request_id)
        outer_root_path = str(scope.get("root_path", ""))
        status = 0

        async def send_with_id(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
                headers = [(k, v) for k, v in message.get("headers", ()) if k != _HEADER_KEY]
                headers.append((_HEADER_KEY, request_id.encode()))
                message = {**message, "headers": headers}
            await send(message)

        started = time.perf_counter()
        try:
            await self.app(scope, receive, send_with_id)
        except Exception:
            route = route_template(scope, outer_root_path)
            log.exception("unhandled error in %s %s", scope.get("method"), route)
            if status != 0:
                # A response under way cannot be replaced: let the server abort the connection
                # so the client cannot mistake a truncated body for a complete one.
                raise
            response = problem_response(InternalError(), str(scope.get("path", "")))
            await response(scope, receive, send_with_id)
        finally:
            seconds = time.perf_counter() - started
            route = route_template(scope, outer_root_path)
            method = str(scope.get("method", ""))
            final = status or NO_RESPONSE
            self.metrics.observe(method, route, final, seconds)
            access_log.log(
                logging.DEBUG if route in QUIET_ROUTES else logging.INFO,
                "%s %s %s",
                method,
                route,
                final,
                extra={
                    "method": method,
                    "route": route,
                    "status": final,
                    "duration_ms": round(seconds * 1000, 3),
                },
            )
            unbind_request_id(token)
