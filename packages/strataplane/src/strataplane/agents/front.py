"""The agents' hot path ahead of the management API.

The app (``app.StrataplaneApp``) hands a request to an agent endpoint to ``AgentFront`` before
FastAPI sees it: no telemetry check, request id, metrics, access log or exception layers (a
poll through them costs several times the endpoint itself). Endpoints read the few headers
they need from the raw ASGI scope and answer with one body. Errors keep the API's shape: a
``ProblemError`` becomes problem+json; anything else is logged and answered with the kernel's
``internal`` problem. Every answer is still counted and timed in the kernel's HTTP metrics
(``http_requests_total`` and ``http_request_duration_seconds``, route = the endpoint's path).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from platformkit.http import InternalError, ProblemError, problem_response
from platformkit.http.metrics import HttpMetrics
from starlette.datastructures import State
from starlette.types import Receive, Scope, Send

from strataplane.actions.fleet_errors import ContentTooLarge, MethodNotAllowed

if TYPE_CHECKING:
    from strataplane.agents.runtime import FleetRuntime

log = logging.getLogger(__name__)


class ClientGone(Exception):
    """The client closed the connection before its request was read."""


class AgentRequest:
    """The parts of a request the agent endpoints use."""

    __slots__ = ("_receive", "headers", "method", "path", "peer")

    def __init__(self, scope: Scope, receive: Receive) -> None:
        self.method: str = scope["method"]
        self.path: str = scope["path"]
        # names arrive lower-cased; for a repeated header the last value wins
        self.headers: dict[bytes, bytes] = dict(scope["headers"])
        client = scope.get("client")
        self.peer: str | None = client[0] if client else None
        self._receive = receive

    def header(self, name: bytes) -> str | None:
        value = self.headers.get(name)
        return value.decode("latin-1") if value is not None else None

    async def body(self, limit: int) -> bytes:
        """The whole body, refused once it exceeds ``limit`` bytes."""
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await self._receive()
            if message["type"] != "http.request":
                raise ClientGone
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                raise ContentTooLarge(f"at most {limit} bytes")
            chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks)


@dataclass(frozen=True, slots=True)
class Reply:
    status: int
    headers: list[tuple[bytes, bytes]]
    body: bytes = b""


type Handler = Callable[[FleetRuntime, AgentRequest], Awaitable[Reply]]


@dataclass(frozen=True, slots=True)
class Endpoint:
    methods: frozenset[str]
    handler: Handler
    route: str = ""  # the path template, for metrics; set by AgentFront


_ID = "{id}"


class AgentFront:
    """Serves ``endpoints`` (by exact path, or a path with one ``{id}`` segment) with the
    runtime at ``state.fleet``."""

    def __init__(
        self, state: State, endpoints: Mapping[str, Endpoint], metrics: HttpMetrics
    ) -> None:
        self._state = state
        self._endpoints = {p: e for p, e in endpoints.items() if _ID not in p}
        self._templates: list[tuple[str, str, Endpoint]] = []
        for p, e in endpoints.items():
            if _ID in p:
                head, tail = p.split(_ID, 1)
                self._templates.append((head, tail, replace(e, route=p)))
        self._all = dict(endpoints)
        self._metrics = metrics

    @property
    def endpoints(self) -> Mapping[str, Endpoint]:
        return self._all

    def route(self, scope: Scope) -> Endpoint | None:
        """The endpoint of an agent request, None for any other request."""
        if scope["type"] != "http":
            return None
        path: str = scope["path"]
        found = self._endpoints.get(path)
        if found is not None or not self._templates:
            return found
        for head, tail, endpoint in self._templates:
            if path.startswith(head) and path.endswith(tail):
                middle = path[len(head) : len(path) - len(tail)]
                if middle and "/" not in middle:
                    return endpoint
        return None

    async def serve(self, endpoint: Endpoint, scope: Scope, receive: Receive, send: Send) -> None:
        started = time.perf_counter()
        status = await self._answer(endpoint, scope, receive, send)
        if status:
            elapsed = time.perf_counter() - started
            route = endpoint.route or scope["path"]
            self._metrics.observe(scope["method"], route, status, elapsed)

    async def _answer(self, endpoint: Endpoint, scope: Scope, receive: Receive, send: Send) -> int:
        """Answer the request; its status, or 0 when the client left before it was read."""
        try:
            if scope["method"] not in endpoint.methods:
                allow = ", ".join(sorted(endpoint.methods))
                raise MethodNotAllowed(headers={"Allow": allow})
            reply = await endpoint.handler(self._state.fleet, AgentRequest(scope, receive))
        except ProblemError as exc:
            await problem_response(exc, scope["path"])(scope, receive, send)
            return exc.status
        except ClientGone:
            return 0
        except Exception:
            log.exception("unhandled error in %s %s", scope["method"], scope["path"])
            await problem_response(InternalError(), scope["path"])(scope, receive, send)
            return InternalError.status
        headers = [*reply.headers, (b"content-length", str(len(reply.body)).encode())]
        await send({"type": "http.response.start", "status": reply.status, "headers": headers})
        await send({"type": "http.response.body", "body": reply.body})
        return reply.status
