"""CookiePolicy: Secure exactly when the server was reached over TLS, as each way says."""

from __future__ import annotations

from platformkit.http.cookies import CookiePolicy
from starlette.requests import Request
from starlette.responses import Response


def request(scheme: str = "http", peer: str = "198.51.100.4", proto: str | None = None) -> Request:
    headers = [(b"x-forwarded-proto", proto.encode())] if proto else []
    scope = {"type": "http", "method": "POST", "path": "/login", "scheme": scheme,
             "server": ("srv", 80), "client": (peer, 5000), "headers": headers,
             "query_string": b""}  # fmt: skip
    return Request(scope)


def test_each_way_of_reaching_the_server_over_tls() -> None:
    plain = CookiePolicy()
    assert not plain.secure(request())
    assert plain.secure(request(scheme="https"))
    assert CookiePolicy(force_secure=True).secure(request())
    assert CookiePolicy.of(force_secure=False, public_url="HTTPS://sp.example").secure(request())
    assert not CookiePolicy.of(force_secure=False, public_url="http://sp.example").secure(request())


def test_x_forwarded_proto_counts_only_from_a_trusted_proxy() -> None:
    behind = CookiePolicy.of(force_secure=False, public_url=None, trusted_proxies=["10.0.0.0/8"])
    assert behind.secure(request(peer="10.1.2.3", proto="https"))
    assert not behind.secure(request(peer="10.1.2.3", proto="http"))
    assert not behind.secure(request(peer="198.51.100.4", proto="https"))
    assert not CookiePolicy().secure(request(peer="10.1.2.3", proto="https"))


def test_set_and_clear_carry_the_flags() -> None:
    response = Response()
    policy = CookiePolicy(force_secure=True)
    policy.set(request(), response, "sid", "v", max_age=60, samesite="strict")
    cookie = response.headers["set-cookie"]
    for flag in ("sid=v", "HttpOnly", "Max-Age=60", "Path=/", "SameSite=strict", "Secure"):
        assert flag in cookie
    cleared = Response()
    CookiePolicy().clear(request(), cleared, "sid")
    assert "Max-Age=0" in cleared.headers["set-cookie"]
    assert "Secure" not in cleared.headers["set-cookie"]
