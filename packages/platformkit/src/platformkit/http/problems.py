"""The error base class every system subclasses, and its one rendering as RFC 9457 problem+json.

A system defines one base (``class StrataplaneError(ProblemError)``) and a subclass per failure,
each with a stable ``code``, an HTTP ``status`` and a ``title``; an instance adds a ``detail``
sentence and data fields. Domain code raises these; only the handlers installed by
:func:`platformkit.http.install` turn them into responses, so every error has the same shape::

    {"type": "urn:problem:service_account.in_use", "title": "Service account in use",
     "status": 409, "detail": "...", "code": "service_account.in_use",
     "instance": "/v1/service-accounts/42", "request_id": "0190...", "bindings": 3}

The kernel's own errors (validation, internal, readiness; idempotency keys in
``platformkit.http.idempotency.errors``) use the same base; routing's 404 and 405 go through
:func:`render_problem` with codes ``not_found`` and ``method_not_allowed``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, ClassVar

from starlette.responses import Response

from platformkit.http.requestid import current_request_id

__all__ = [
    "PROBLEM_MEDIA_TYPE",
    "InternalError",
    "NotReady",
    "ProblemError",
    "ProblemResponse",
    "ValidationFailed",
    "problem_body",
    "problem_response",
    "render_problem",
]

PROBLEM_MEDIA_TYPE = "application/problem+json"
RESERVED = frozenset({"type", "title", "status", "detail", "code", "instance", "request_id"})


class ProblemError(Exception):
    """Base of every error a client may see. Subclasses set ``code``, ``status`` and ``title``.

    ``type_base`` prefixes the code to form the problem ``type`` URI; a system may set it on its
    own base class (``"https://errors.example.com/"``) to point at documentation.
    """

    code: ClassVar[str] = "internal"
    status: ClassVar[int] = 500
    title: ClassVar[str] = "Internal error"
    type_base: ClassVar[str] = "urn:problem:"

    def __init__(
        self, detail: str | None = None, *, headers: Mapping[str, str] | None = None, **data: Any
    ) -> None:
        clash = RESERVED.intersection(data)
        if clash:
            raise ValueError(f"problem data may not use reserved member names: {sorted(clash)}")
        super().__init__(detail or self.title)
        self.detail = detail
        self.data = data
        self.headers = dict(headers or {})

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if not 400 <= cls.status <= 599:
            raise TypeError(f"{cls.__name__}.status must be an HTTP error status, not {cls.status}")

    @property
    def type_uri(self) -> str:
        return self.type_base + self.code


class ProblemResponse(Response):
    media_type = PROBLEM_MEDIA_TYPE

    def render(self, content: Any) -> bytes:
        return json.dumps(content, ensure_ascii=False, separators=(",", ":"), default=str).encode()


def problem_response(error: ProblemError, instance: str) -> ProblemResponse:
    """Render ``error`` for the request at path ``instance`` (the path only: queries may hold
    secrets)."""
    body = problem_body(error, instance)
    return ProblemResponse(body, status_code=error.status, headers=dict(error.headers))


def render_problem(
    *,
    type_uri: str,
    code: str,
    status: int,
    title: str,
    detail: str | None,
    instance: str,
    data: Mapping[str, Any] | None = None,
    headers: Mapping[str, str] | None = None,
) -> ProblemResponse:
    """The single place a problem response is built; framework errors come here directly."""
    body = _body(type_uri, code, status, title, detail, instance, data)
    return ProblemResponse(body, status_code=status, headers=dict(headers or {}))


def problem_body(error: ProblemError, instance: str) -> dict[str, Any]:
    """The problem document of ``error`` as a value, for an answer that reports one problem per
    item of a batch inside a successful response."""
    return _body(
        error.type_uri, error.code, error.status, error.title, error.detail, instance, error.data
    )


def _body(
    type_uri: str,
    code: str,
    status: int,
    title: str,
    detail: str | None,
    instance: str,
    data: Mapping[str, Any] | None,
) -> dict[str, Any]:
    body: dict[str, Any] = {"type": type_uri, "title": title, "status": status}
    if detail:
        body["detail"] = detail
    body["code"] = code
    body["instance"] = instance
    request_id = current_request_id()
    if request_id is not None:
        body["request_id"] = request_id
    body.update(data or {})
    return body


class InternalError(ProblemError):
    """Anything unexpected. Its detail never carries the exception: that goes to the log."""

    code = "internal"
    status = 500
    title = "Internal server error"


class ValidationFailed(ProblemError):
    code = "validation_failed"
    status = 422
    title = "Request validation failed"


class NotReady(ProblemError):
    code = "not_ready"
    status = 503
    title = "Service not ready"
