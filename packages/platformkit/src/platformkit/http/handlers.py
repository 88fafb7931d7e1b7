"""Exception handlers that turn every client-visible failure into problem+json.

Registered by :func:`platformkit.http.install` on FastAPI and plain Starlette apps alike:
``ProblemError`` (the systems' trees and the kernel's own errors), Starlette/FastAPI
``HTTPException`` (routing's 404 and 405, framework 4xx) and FastAPI's request validation error
(422 with one entry per invalid field); and, for a system that names its problem for it, an
unreachable database (503). Unexpected exceptions are not handled here but by the kernel
middleware, which logs them and answers a bare 500.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from http import HTTPStatus
from typing import Any, cast

from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ExceptionHandler

from platformkit.db.outage import database_unreachable
from platformkit.http.idempotency.component import IdempotentReplay, replay_response
from platformkit.http.problems import (
    ProblemError,
    ValidationFailed,
    problem_response,
    render_problem,
)

__all__ = ["database_outage_handler", "exception_handlers", "field_error"]

# Stable codes for the statuses frameworks raise on their own; others become ``http_<status>``.
_HTTP_CODES = {
    400: "bad_request",
    401: "unauthenticated",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    406: "not_acceptable",
    409: "conflict",
    413: "content_too_large",
    415: "unsupported_media_type",
    429: "rate_limited",
}


def _problem_error(request: Request, exc: Exception) -> Response:
    return problem_response(cast(ProblemError, exc), request.url.path)


def _http_exception(request: Request, exc: Exception) -> Response:
    error = cast(HTTPException, exc)
    status = error.status_code
    try:
        title = HTTPStatus(status).phrase
    except ValueError:
        title = "Error"
    if status < 400:  # a framework redirect or similar raised as an exception: not a problem
        return Response(status_code=status, headers=error.headers)
    code = _HTTP_CODES.get(status, f"http_{status}")
    detail = error.detail if isinstance(error.detail, str) and error.detail != title else None
    return render_problem(
        type_uri=ProblemError.type_base + code,
        code=code,
        status=status,
        title=title,
        detail=detail,
        instance=request.url.path,
        headers=error.headers,
    )


def field_error(loc: Sequence[object], msg: str, kind: str) -> dict[str, Any]:
    """One entry of a 422's ``errors``: ``loc`` starts with where the field is (``body``,
    ``query``, ``path``, ``header``), ``field`` is the rest joined by dots. The offending input
    is left out on purpose: it may be a password or a token."""
    parts = [str(part) for part in loc]
    field = ".".join(parts[1:]) if len(parts) > 1 else ".".join(parts)
    return {"field": field, "loc": parts, "msg": msg, "type": kind}


def _field_error(raw: Mapping[str, Any]) -> dict[str, Any]:
    return field_error(raw.get("loc", ()), str(raw.get("msg", "")), str(raw.get("type", "")))


def _validation_error(request: Request, exc: Exception) -> Response:
    errors = [_field_error(e) for e in cast(RequestValidationError, exc).errors()]
    problem = ValidationFailed(f"{len(errors)} invalid field(s)", errors=errors)
    return problem_response(problem, request.url.path)


def database_outage_handler(problem: Callable[[], ProblemError]) -> ExceptionHandler:
    """For psycopg's and the pool's errors: the system's 503 ``problem`` when the database is
    unreachable (``platformkit.db.outage``); any other such error goes on to the kernel's 500."""

    async def handle(request: Request, exc: Exception) -> Response:
        if not database_unreachable(exc):
            raise exc
        return problem_response(problem(), request.url.path)

    return handle


def exception_handlers() -> dict[type[Exception], ExceptionHandler]:
    """Handlers keyed by exception class, ready for ``app.add_exception_handler``."""
    return {
        ProblemError: _problem_error,
        HTTPException: _http_exception,
        RequestValidationError: _validation_error,
        IdempotentReplay: replay_response,
    }
