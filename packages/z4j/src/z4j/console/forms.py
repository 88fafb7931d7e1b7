"""Form handling for the dashboard: the two CSRF tokens and reading posted fields.

Signed-in forms carry ``csrf_token``, an HMAC of the session id (``sessions.csrf_token``).
The sign-in and setup forms have no session yet, so they use a double-submit token: a random
value in a SameSite=Strict cookie that the form must repeat. Both come on top of the
middleware's Origin check.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from platformkit.http.formcsrf import form_token, form_token_valid, remember_form_token
from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from z4j.actions import sessions
from z4j.actions.context import Ctx
from z4j.actions.errors import CsrfRejected, Z4jError
from z4j.api.v1 import cookies
from z4j.api.v1.deps import brain_of, require_ctx


def field(form: FormData, name: str) -> str:
    value = form.get(name)
    return value if isinstance(value, str) else ""


async def signed_in_form(request: Request) -> tuple[Ctx, FormData]:
    """The acting user and the posted form, after checking the form's token."""
    ctx = require_ctx(request)
    form = await request.form()
    if ctx.session_id is None or not sessions.csrf_valid(
        ctx.brain, ctx.session_id, field(form, "csrf_token")
    ):
        raise CsrfRejected("The form expired or came from elsewhere; reload and try again.")
    return ctx, form


async def submit_project_form(
    request: Request,
    project_id: uuid.UUID,
    action: Callable[[Ctx, FormData], Awaitable[str | None]],
    *,
    page: Callable[..., Awaitable[Response]],
    shown: tuple[type[Z4jError], ...],
    kept: Callable[[FormData], dict[str, Any]],
) -> Response:
    """Run ``action(ctx, form)`` on a project page's signed-in form: back to the page
    (``page(request, ctx, project_id, ...)``) with its notice, or with a ``shown`` error and
    what ``kept`` keeps of the form. An action returning None took the caller out of the
    project: on to the project list. A project the caller cannot see is an error page."""
    ctx, form = await signed_in_form(request)
    try:
        notice = await action(ctx, form)
    except shown as exc:
        if exc.code == "project.not_found":
            raise
        return await page(request, ctx, project_id, status=exc.status,
                          error=exc.detail or exc.title, **kept(form))  # fmt: skip
    if notice is None:
        return RedirectResponse("/projects", status_code=303)
    return await page(request, ctx, project_id, notice=notice)


def anonymous_token(request: Request) -> str:
    """The double-submit token for a sign-in or setup form (reuses the cookie's value)."""
    return form_token(request, cookies.FORM_CSRF)


def remember_anonymous_token(response: Response, request: Request, token: str) -> None:
    policy = cookies.policy(brain_of(request).settings)
    remember_form_token(request, response, policy, cookies.FORM_CSRF, token)


async def anonymous_form(request: Request) -> FormData:
    form = await request.form()
    if not form_token_valid(request, cookies.FORM_CSRF, field(form, "csrf_token")):
        raise CsrfRejected("The form expired; reload the page and try again.")
    return form
