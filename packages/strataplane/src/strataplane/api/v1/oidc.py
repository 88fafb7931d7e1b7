"""Single sign-on: the browser's round trip through the OIDC provider.

``GET /api/v1/auth/oidc/login`` sends the browser to the provider, with the login's state also
in the ``sp_oidc`` cookie, so a callback can only complete the login its own browser started;
``GET /api/v1/auth/oidc/callback`` checks that, completes the login (actions/oidc.py), sets the
session cookie and sends the browser on to where it was going. Both are navigations, not API
calls: they answer 303.
"""

from __future__ import annotations

import hmac
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import RedirectResponse
from platformkit.http import problem_responses

from strataplane import errors
from strataplane.actions import oidc
from strataplane.api.deps import COOKIE, request_meta, services_of
from strataplane.api.v1.auth import cookie_policy

router = APIRouter(prefix="/auth/oidc", tags=["auth"])

PREFIX = "/api/v1/auth/oidc/"  # navigations: the console answers their failures as a page

STATE_COOKIE = "sp_oidc"
CALLBACK = "/api/v1/auth/oidc/callback"
_SEE_OTHER: dict[int | str, dict[str, Any]] = {
    303: {"description": "On to the provider (login) or the next page (callback)"}
}


def safe_next(target: str | None, default: str = "/") -> str:
    """Only a path on this server: never an absolute or scheme-relative URL, nor a NUL."""
    if not target or "\x00" in target or not target.startswith("/"):
        return default
    return default if target.startswith(("//", "/\\")) else target[:2000]


def redirect_uri(request: Request) -> str:
    public = services_of(request).settings.public_url
    base = public.rstrip("/") if public else str(request.base_url).rstrip("/")
    return base + CALLBACK


@router.get(
    "/login",
    status_code=303,
    response_class=RedirectResponse,
    responses={**_SEE_OTHER, **problem_responses(404)},
)
async def oidc_login(
    request: Request, next: Annotated[str | None, Query(max_length=2000)] = None
) -> RedirectResponse:
    """Start a sign-in at the provider; ``next``: the page to land on afterwards."""
    url, state = await oidc.begin_login(
        services_of(request), redirect_uri(request), safe_next(next)
    )
    response = RedirectResponse(url, status_code=303)
    cookie_policy(request).set(
        request, response, STATE_COOKIE, state, max_age=int(oidc.LOGIN_LIFETIME.total_seconds())
    )
    return response


@router.get(
    "/callback",
    status_code=303,
    response_class=RedirectResponse,
    responses={**_SEE_OTHER, **problem_responses(401, 403, 404)},
)
async def oidc_callback(
    request: Request,
    code: Annotated[str | None, Query(max_length=4096)] = None,
    state: Annotated[str | None, Query(max_length=512)] = None,
    error: Annotated[str | None, Query(max_length=200)] = None,
) -> RedirectResponse:
    """Where the provider sends the browser back, with a code or an error."""
    services = services_of(request)
    oidc.client_of(services)  # 404 where no provider is configured
    cookie = request.cookies.get(STATE_COOKIE, "")
    if error is not None or not code or not state:
        raise errors.OidcFailed("the provider did not sign you in")
    if not cookie or not hmac.compare_digest(cookie.encode(), state.encode()):
        raise errors.OidcFailed("this sign-in was started in another browser; start again")
    new, target = await oidc.complete_login(
        services, request_meta(request), code=code, state=state, redirect_uri=redirect_uri(request)
    )
    response = RedirectResponse(target, status_code=303)
    policy = cookie_policy(request)
    policy.clear(request, response, STATE_COOKIE)
    policy.set(
        request, response, COOKIE, new.cookie, max_age=services.settings.session_hours * 3600
    )
    return response
