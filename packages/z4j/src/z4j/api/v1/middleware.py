"""Per-request authentication and the cross-site check, as one plain ASGI middleware.

For every HTTP request outside /static it

* refuses an unsafe method (POST, PUT, PATCH, DELETE) that a browser marks as cross-site:
  an ``Origin`` other than this brain's, or ``Sec-Fetch-Site: cross-site``/``same-site``.
  Requests without either header (curl, scripts) pass; forms also carry a token
  (``z4j.console``), so this check is the second of two;
* on the REST API, takes ``Authorization: Bearer <API key>`` instead of a cookie: a valid key
  lands in ``request.state.api_key``, anything else is a 401 ``api_key.invalid`` at once;
* resolves the session cookie once and leaves the result in ``request.state.session``;
* sends the cookie again when the session's expiry slid forward.

Plain ASGI (not BaseHTTPMiddleware) so server-sent event streams pass through untouched.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from urllib.parse import urlsplit

from platformkit.http import ProblemError
from starlette.datastructures import Headers, MutableHeaders
from starlette.requests import Request, cookie_parser
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from z4j.actions import api_keys, audit, sessions
from z4j.actions.errors import ApiKeyInvalid, CsrfRejected
from z4j.api.v1 import cookies
from z4j.brain import Brain

API = "/api/v1/"
UNSAFE = frozenset({"POST", "PUT", "PATCH", "DELETE"})
# Agents authenticate every request with their own bearer token, never a session cookie.
_SKIP = ("/static/", "/ws/", "/api/v1/agent/", "/healthz", "/readyz", "/metrics")


def _netloc(url: str) -> str:
    return urlsplit(url).netloc.lower()


def cross_site(headers: Headers, brain: Brain) -> bool:
    origin = headers.get("origin")
    if origin is not None:
        own = {headers.get("host", "").lower()}
        if brain.settings.public_url:
            own.add(_netloc(brain.settings.public_url))
        return origin == "null" or _netloc(origin) not in own
    return headers.get("sec-fetch-site", "same-origin") in ("cross-site", "same-site")


def _cookie(headers: Headers, name: str) -> str | None:
    raw = headers.get("cookie")
    return cookie_parser(raw).get(name) if raw else None


def _bearer(headers: Headers) -> str | None:
    scheme, _, value = headers.get("authorization", "").partition(" ")
    return value.strip() if scheme.lower() == "bearer" else None


ErrorRenderer = Callable[[Request, ProblemError], Awaitable[Response]]


class AuthMiddleware:
    def __init__(self, app: ASGIApp, render_error: ErrorRenderer) -> None:
        self.app = app
        self.render_error = render_error

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"].startswith(_SKIP):
            await self.app(scope, receive, send)
            return
        brain: Brain = scope["app"].state.brain
        headers = Headers(scope=scope)
        if scope["method"] in UNSAFE and cross_site(headers, brain):
            response = await self.render_error(Request(scope, receive), CsrfRejected())
            await response(scope, receive, send)
            return
        state = scope.setdefault("state", {})
        bearer = _bearer(headers) if scope["path"].startswith(API) else None
        if bearer is not None:
            key = await api_keys.authenticate(brain, bearer)
            if key is None:
                response = await self.render_error(Request(scope, receive), ApiKeyInvalid())
                await response(scope, receive, send)
                return
            state["session"], state["api_key"] = None, key
            token = audit.ACTING_KEY.set(key.grant.id)
            try:
                await self.app(scope, receive, send)
            finally:
                audit.ACTING_KEY.reset(token)
            return
        session = await sessions.resolve(brain, _cookie(headers, cookies.SESSION))
        state["session"] = session
        if session is None or not session.extended:
            await self.app(scope, receive, send)
            return

        async def send_with_cookie(message: Message) -> None:
            if message["type"] == "http.response.start":
                # Routes may have replaced or cleared the cookie (logout); leave theirs alone.
                current = MutableHeaders(scope=message)
                if not any(
                    v.startswith(cookies.SESSION + "=") for v in current.getlist("set-cookie")
                ):
                    carrier = Response()
                    cookies.set_session(
                        Request(scope),
                        carrier,
                        brain.settings,
                        _cookie(headers, cookies.SESSION) or "",
                        session.expires_at,
                    )
                    current.append("set-cookie", carrier.headers["set-cookie"])
            await send(message)

        await self.app(scope, receive, send_with_cookie)
