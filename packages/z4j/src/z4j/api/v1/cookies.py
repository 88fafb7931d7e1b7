"""The brain's cookies: the session (HttpOnly, SameSite=Lax) and the double-submit CSRF cookie
of the sign-in and setup forms; both ``Secure`` when the brain is reached over TLS or
``Z4J_PUBLIC_URL`` is https (``platformkit.http.cookies``), or with ``Z4J_SECURE_COOKIES``."""

from __future__ import annotations

from datetime import UTC, datetime

from platformkit.http.cookies import CookiePolicy
from starlette.requests import Request
from starlette.responses import Response

from z4j.settings import Settings

SESSION = "z4j_session"
FORM_CSRF = "z4j_csrf"


def policy(settings: Settings) -> CookiePolicy:
    return CookiePolicy.of(force_secure=settings.secure_cookies, public_url=settings.public_url)


def set_session(
    request: Request, response: Response, settings: Settings, value: str, expires_at: datetime
) -> None:
    max_age = max(0, int((expires_at - datetime.now(UTC)).total_seconds()))
    policy(settings).set(request, response, SESSION, value, max_age=max_age)


def clear_session(request: Request, response: Response, settings: Settings) -> None:
    policy(settings).clear(request, response, SESSION)
