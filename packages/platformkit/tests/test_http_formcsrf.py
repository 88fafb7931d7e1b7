"""The double-submit token of forms shown before sign-in: reused from its cookie, set
SameSite=Strict, and valid only when the form repeats the cookie exactly."""

from __future__ import annotations

from platformkit.http.cookies import CookiePolicy
from platformkit.http.formcsrf import form_token, form_token_valid, remember_form_token
from starlette.requests import Request
from starlette.responses import Response


def request(cookie: str | None = None) -> Request:
    headers = [(b"cookie", f"f={cookie}".encode())] if cookie is not None else []
    scope = {"type": "http", "method": "GET", "path": "/login", "scheme": "http",
             "server": ("srv", 80), "client": ("127.0.0.1", 5000), "headers": headers,
             "query_string": b""}  # fmt: skip
    return Request(scope)


def test_a_new_token_until_the_cookie_holds_one() -> None:
    fresh = form_token(request(), "f")
    assert len(fresh) >= 20
    assert form_token(request(), "f") != fresh
    assert form_token(request(fresh), "f") == fresh
    assert form_token(request("short"), "f") != "short"


def test_the_cookie_is_strict_and_set_once() -> None:
    response = Response()
    remember_form_token(request(), response, CookiePolicy(), "f", "t" * 32)
    assert "SameSite=strict" in response.headers["set-cookie"]
    again = Response()
    remember_form_token(request("t" * 32), again, CookiePolicy(), "f", "t" * 32)
    assert "set-cookie" not in again.headers


def test_only_the_same_value_is_valid() -> None:
    token = "a" * 32
    assert form_token_valid(request(token), "f", token)
    assert not form_token_valid(request(token), "f", "b" * 32)
    assert not form_token_valid(request(), "f", "")
    assert not form_token_valid(request("x"), "f", "x")  # too short to be ours
