"""Egress rules for URLs a tenant supplies (a CRL, a webhook, a model endpoint): the server
fetches them from its own network, so a URL must not reach what only the server can reach.
A host is refused when any address it resolves to is not global (loopback, private, link-local
such as a cloud's metadata service, multicast, reserved), unless a network the operator allows
holds it. The address is checked when the request is made; the URL's own DNS answer may change
between that check and the connection, so allow only networks whose hosts are safe to reach."""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Sequence
from urllib.parse import urlsplit

__all__ = ["Network", "egress_problem", "networks"]

type Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def networks(cidrs: Sequence[str]) -> tuple[Network, ...]:
    return tuple(ipaddress.ip_network(c, strict=False) for c in cidrs)


def _address_problem(address: str, allow: Sequence[Network]) -> str | None:
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if any(ip in n for n in allow):
        return None
    if ip.is_global and not ip.is_multicast:
        return None
    return f"{ip} is not a public address (allow its network to reach it)"


async def egress_problem(url: str, allow: Sequence[Network] = ()) -> str | None:
    """Why the server must not fetch ``url``, None when it may."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return "an http or https URL with a host"
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        return "an invalid port"
    try:
        infos = await asyncio.get_running_loop().getaddrinfo(
            parts.hostname, port, type=socket.SOCK_STREAM
        )
    except (OSError, UnicodeError):
        return f"{parts.hostname} does not resolve"
    for info in infos:
        problem = _address_problem(str(info[4][0]), allow)
        if problem is not None:
            return problem
    return None
