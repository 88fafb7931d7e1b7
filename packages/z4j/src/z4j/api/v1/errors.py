"""Where errors are rendered: the kernel's problem+json under /api, an HTML page elsewhere.

``platformkit.http.install`` registers handlers that answer problem+json everywhere; z4j
replaces them with ones that keep that answer for API paths and hand dashboard paths to the
console's error page (which also turns ``auth.required`` into a redirect to sign-in).
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from platformkit.http import ProblemError, ValidationFailed, problem_response
from platformkit.http.handlers import exception_handlers
from starlette.exceptions import HTTPException
from starlette.responses import Response

from z4j.actions.errors import Z4jError

HtmlRenderer = Callable[[Request, ProblemError], Awaitable[Response]]


def is_api(request: Request) -> bool:
    return request.url.path.startswith("/api/")


async def respond(request: Request, exc: ProblemError, html: HtmlRenderer) -> Response:
    """problem+json for the API, the dashboard's error page (or sign-in redirect) elsewhere."""
    if is_api(request):
        return problem_response(exc, request.url.path)
    return await html(request, exc)


class PageNotFound(Z4jError):
    code, status, title = "not_found", 404, "Page not found"


class RequestRefused(Z4jError):
    code, status, title = "bad_request", 400, "Request not accepted"


def _as_problem(exc: Exception) -> ProblemError:
    if isinstance(exc, ProblemError):
        return exc
    if isinstance(exc, HTTPException):
        return PageNotFound() if exc.status_code == 404 else RequestRefused(str(exc.detail))
    return ValidationFailed("The address is not valid.")


def install(app: FastAPI, html: HtmlRenderer) -> None:
    """Call after ``platformkit.http.install``: replaces its handlers with path-aware ones."""
    kernel = exception_handlers()
    for exc_class in (ProblemError, HTTPException, RequestValidationError):
        api_handler = kernel[exc_class]

        async def handler(
            request: Request, exc: Exception, api_handler: Callable[..., object] = api_handler
        ) -> Response:
            if is_api(request):
                result = api_handler(request, exc)
                response = await result if inspect.isawaitable(result) else result
                if not isinstance(response, Response):
                    raise TypeError(f"{api_handler!r} answered {response!r}")
                return response
            return await html(request, _as_problem(exc))

        app.add_exception_handler(exc_class, handler)
