"""Form handling for the dashboard: the two CSRF tokens and reading posted fields.

Signed-in forms carry ``csrf_token``, an HMAC of the session id (``sessions.csrf_token``).
The sign-in and setup forms have no session yet, so they use a double-submit token: a random
value in a SameSite=Strict cookie that the form must repeat. Both come on top of the
middleware's Origin check.
"""

from __future__ import annotations

import hmac
import secrets

from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import Response

from z4j.actions import sessions
from z4j.actions.context import Ctx
from z4j.actions.errors import CsrfRejected
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


def anonymous_token(request: Request) -> str:
    """The double-submit token for a sign-in or setup form (reuses the cookie's value)."""
    current = request.cookies.get(cookies.FORM_CSRF, "")
    return current if 20 <= len(current) <= 64 else secrets.token_urlsafe(24)


def remember_anonymous_token(response: Response, request: Request, token: str) -> None:
    if request.cookies.get(cookies.FORM_CSRF) != token:
        cookies.set_form_csrf(request, response, brain_of(request).settings, token)


async def anonymous_form(request: Request) -> FormData:
    form = await request.form()
    cookie = request.cookies.get(cookies.FORM_CSRF, "")
    posted = field(form, "csrf_token")
    if not cookie or not hmac.compare_digest(cookie.encode(), posted.encode()):
        raise CsrfRejected("The form expired; reload the page and try again.")
    return form
