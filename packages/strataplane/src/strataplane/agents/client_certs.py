"""The client certificate of an agent request, as the TLS front (platformkit.http.tls_front)
verified it: ``X-Client-Cert`` (base64 DER), believed only from the fleet's trusted proxies.
An agent with a bound certificate must present it on every request that can carry one: the
heartbeat and the secret store, not the configuration URL (Telegraf fetches ``--config`` with
Go's default HTTP client, which has no client certificate)."""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import ipaddress
from functools import lru_cache
from typing import TYPE_CHECKING

from strataplane.actions import secret_errors as se
from strataplane.agents.front import AgentRequest
from strataplane.store.fleet_serving import ServingState

if TYPE_CHECKING:
    from strataplane.agents.runtime import FleetRuntime

_HEADER = b"x-client-cert"
type Network = ipaddress.IPv4Network | ipaddress.IPv6Network


@lru_cache(maxsize=16)
def _networks(cidrs: tuple[str, ...]) -> tuple[Network, ...]:
    return tuple(ipaddress.ip_network(c, strict=False) for c in cidrs)


def presented_der(rt: FleetRuntime, req: AgentRequest) -> bytes | None:
    raw = req.header(_HEADER)
    if raw is None or req.peer is None:
        return None
    try:
        peer = ipaddress.ip_address(req.peer)
    except ValueError:
        return None
    if not any(peer in n for n in _networks(tuple(rt.settings.proxy_from))):
        return None
    try:
        return base64.b64decode(raw, validate=True)
    except (binascii.Error, ValueError):
        return None


def require_bound(rt: FleetRuntime, req: AgentRequest, state: ServingState) -> None:
    """403 ``agent.certificate_required`` unless a bound agent presents its certificate."""
    bound = state.identity_fingerprint
    if bound is None:
        return
    der = presented_der(rt, req)
    if der is None or not hmac.compare_digest(hashlib.sha256(der).digest(), bound):
        raise se.CertificateRequired("present the client certificate bound to this agent")
