"""Who is looking at a console page: the web session behind the ``sp_session`` cookie (the same
sessions the API takes), and the checks of the forms they post.

A page needs a session bound to a tenant; a session bound to nothing yet, or to the platform,
is sent to choose a tenant. Every form carries the session's CSRF token in ``csrf_token``,
compared in constant time before the form's action runs.
"""

from __future__ import annotations

import hmac
from dataclasses import dataclass

from platformkit.http import current_request_id
from starlette.datastructures import FormData
from starlette.requests import Request

from strataplane import errors
from strataplane.actions.context import Ctx, Principal, user_ctx
from strataplane.actions.sessions import authenticate_session
from strataplane.api.deps import COOKIE, services_of


class ChooseTenant(errors.StrataplaneError):
    """A signed-in session that is not bound to a tenant (rendered as a redirect)."""

    code, status, title = "auth.choose_tenant", 409, "Choose a tenant first"


@dataclass(frozen=True)
class Viewer:
    ctx: Ctx
    principal: Principal
    csrf: str


async def viewer_of(request: Request, *, tenant: bool = True) -> Viewer:
    """The signed-in person (AuthRequired: the sign-in page), bound to a tenant unless
    ``tenant`` is False."""
    cookie = request.cookies.get(COOKIE)
    if not cookie:
        raise errors.AuthRequired()
    services = services_of(request)
    principal, csrf = await authenticate_session(services, cookie)
    if tenant and principal.tenant_id is None:
        raise ChooseTenant()
    host = request.client.host if request.client is not None else None
    ctx = user_ctx(services, principal, request_id=current_request_id(), source_ip=host)
    viewer = Viewer(ctx, principal, csrf)
    request.state.console_page = viewer
    return viewer


def field(form: FormData, name: str, limit: int = 1 << 20) -> str:
    """A posted text field, cut at ``limit``; a NUL (which PostgreSQL cannot store in text)
    refuses the form with 422 naming the field, rather than failing deeper."""
    value = form.get(name)
    if not isinstance(value, str):
        return ""
    if "\x00" in value:
        raise errors.InvalidInput("the field holds a NUL character", field=name)
    return value[:limit]


async def posted(request: Request, *, tenant: bool = True) -> tuple[Viewer, FormData]:
    """The signed-in person and their form, once the form's token matched the session's."""
    viewer = await viewer_of(request, tenant=tenant)
    form = await request.form()
    token = field(form, "csrf_token", 200)
    if not viewer.csrf or not hmac.compare_digest(token.encode(), viewer.csrf.encode()):
        raise errors.CsrfRejected("The form expired or came from elsewhere; reload and retry.")
    return viewer, form
