"""Session cookies, set one way by every system: HttpOnly, SameSite, path ``/``, and ``Secure``
whenever the server is reached over TLS.

The server counts as reached over TLS when any of these holds:

- the request's own scheme is ``https`` (granian serving TLS itself);
- the request came from a trusted proxy (``trusted_proxies``, the system's proxy networks, which
  include the PROXY-protocol front) that said ``X-Forwarded-Proto: https``; the front says so
  when the load balancer's PROXY v2 header carries the TLS flag, and drops what clients send;
- the deployment is configured as public over https (``public_url``, a system's ``*_PUBLIC_URL``);
- the operator forces it (``*_SECURE_COOKIES=true``).

A browser then sends the cookie back only over https, so a session cannot leak over plain
HTTP. See docs/platformkit/http.md, "Session cookies".
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from starlette.requests import Request
from starlette.responses import Response

__all__ = ["CookiePolicy"]

type Network = ipaddress.IPv4Network | ipaddress.IPv6Network
SameSite = Literal["lax", "strict", "none"]


@dataclass(frozen=True)
class CookiePolicy:
    force_secure: bool = False
    public_url: str | None = None
    trusted_proxies: tuple[Network, ...] = ()

    @classmethod
    def of(
        cls, *, force_secure: bool, public_url: str | None, trusted_proxies: Iterable[str] = ()
    ) -> CookiePolicy:
        networks = tuple(ipaddress.ip_network(cidr, strict=False) for cidr in trusted_proxies)
        return cls(force_secure, public_url, networks)

    def secure(self, request: Request) -> bool:
        """Whether ``request`` reached the server over TLS, as the module docstring says."""
        if self.force_secure or request.url.scheme in ("https", "wss"):
            return True
        if (self.public_url or "").lower().startswith("https://"):
            return True
        forwarded = request.headers.get("x-forwarded-proto", "")
        return forwarded.strip().lower() == "https" and self._from_proxy(request)

    def _from_proxy(self, request: Request) -> bool:
        if request.client is None or not self.trusted_proxies:
            return False
        try:
            peer = ipaddress.ip_address(request.client.host)
        except ValueError:
            return False
        return any(peer in network for network in self.trusted_proxies)

    def set(
        self,
        request: Request,
        response: Response,
        name: str,
        value: str,
        *,
        max_age: int | None = None,
        samesite: SameSite = "lax",
    ) -> None:
        """Set the HttpOnly cookie ``name`` (a session or a form's CSRF cookie)."""
        response.set_cookie(
            name,
            value,
            max_age=max_age,
            path="/",
            httponly=True,
            samesite=samesite,
            secure=self.secure(request),
        )

    def clear(
        self, request: Request, response: Response, name: str, *, samesite: SameSite = "lax"
    ) -> None:
        response.delete_cookie(
            name, path="/", httponly=True, samesite=samesite, secure=self.secure(request)
        )
