"""The CSRF token of a form shown before anyone is signed in (a sign-in page): a random value in
a SameSite=Strict cookie that the form repeats in a hidden field (double submit). Forms of a
signed-in person use their session's own token instead.

    token = form_token(request, COOKIE)                 # in the page, as csrf_token
    remember_form_token(request, response, policy, COOKIE, token)
    if not form_token_valid(request, COOKIE, posted): refuse
"""

from __future__ import annotations

import hmac
import secrets

from starlette.requests import Request
from starlette.responses import Response

from platformkit.http.cookies import CookiePolicy

__all__ = ["form_token", "form_token_valid", "remember_form_token"]

_MIN, _MAX = 20, 64


def form_token(request: Request, cookie: str) -> str:
    """The token for a form: the cookie's value when it holds one, else a new one."""
    current = request.cookies.get(cookie, "")
    return current if _MIN <= len(current) <= _MAX else secrets.token_urlsafe(24)


def remember_form_token(
    request: Request, response: Response, policy: CookiePolicy, cookie: str, token: str
) -> None:
    """Set the cookie unless it already holds ``token``."""
    if request.cookies.get(cookie) != token:
        policy.set(request, response, cookie, token, samesite="strict")


def form_token_valid(request: Request, cookie: str, posted: str) -> bool:
    held = request.cookies.get(cookie, "")
    if not (_MIN <= len(held) <= _MAX):
        return False
    return hmac.compare_digest(held.encode(), posted.encode())
