"""The brain's cookies: the session (HttpOnly, SameSite=Lax, Secure behind TLS) and the
double-submit CSRF cookie of the sign-in and setup forms."""

from __future__ import annotations

from datetime import UTC, datetime

from starlette.responses import Response

from z4j.settings import Settings

SESSION = "z4j_session"
FORM_CSRF = "z4j_csrf"


def set_session(response: Response, settings: Settings, value: str, expires_at: datetime) -> None:
    max_age = max(0, int((expires_at - datetime.now(UTC)).total_seconds()))
    response.set_cookie(
        SESSION,
        value,
        max_age=max_age,
        path="/",
        httponly=True,
        samesite="lax",
        secure=settings.secure_cookies,
    )


def clear_session(response: Response, settings: Settings) -> None:
    response.delete_cookie(
        SESSION, path="/", httponly=True, samesite="lax", secure=settings.secure_cookies
    )


def set_form_csrf(response: Response, settings: Settings, value: str) -> None:
    response.set_cookie(
        FORM_CSRF, value, path="/", httponly=True, samesite="strict", secure=settings.secure_cookies
    )
