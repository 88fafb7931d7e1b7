"""Settings of the agent-facing side, environment variables prefixed STRATAPLANE_FLEET_."""

from __future__ import annotations

import socket

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class FleetSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="STRATAPLANE_FLEET_", extra="ignore")

    agent_url: str = Field(
        default="http://127.0.0.1:7800",
        description="server.agent_url: the base URL agents reach this server at; rendered into "
        "every artifact (heartbeat and secret store URLs). `serve` sets it from --host and "
        "--port when it is not given; a change re-renders every agent without a merge.",
    )
    egress_allow: list[str] = Field(
        default_factory=list,
        description="CIDRs the server may fetch tenant-supplied URLs from although they are not "
        "public (trust anchors' CRLs); every other non-public address is refused.",
    )
    crl_min_refresh: float = Field(
        default=60.0,
        gt=0,
        description="Fewest seconds between fetches of one trust anchor's CRL (its nextUpdate "
        "decides, within this and an hour).",
    )
    proxy_from: list[str] = Field(
        default_factory=list,
        description="CIDRs of proxies whose X-Forwarded-For is trusted for agents' source "
        "addresses (agent_proxy_from); from anyone else the header is ignored.",
    )
    credential_ttl: float = Field(
        default=300.0,
        description="Seconds a credential lookup stays cached; revocations also reach every "
        "replica at once by NOTIFY.",
    )
    state_ttl: float = Field(
        default=300.0,
        description="Seconds an agent's served state stays cached between NOTIFY invalidations.",
    )
    flush_interval: float = Field(
        default=0.5, description="Seconds between batched writes of heartbeats and polls."
    )
    controller_interval: float = Field(
        default=5.0, description="Seconds between runs of the fleet controllers per shard."
    )
    elastic_poll: float = Field(
        default=300.0,
        gt=0,
        description="Longest an Elastic Agent check-in waits for an action, seconds (the "
        "agent's poll_timeout less 2 minutes, at least 1 minute, at most this).",
    )
    elastic_rounds: int = Field(
        default=6,
        gt=0,
        description="Elastic Agent check-in rounds (one transaction each) a worker runs at "
        "once; keep it well under the pool size (pool_size) so the batcher, the controllers "
        "and the API keep connections.",
    )
    elastic_queue: int = Field(
        default=200,
        ge=0,
        description="Check-ins and acknowledgements that may wait for a round per worker; "
        "beyond it a new one is answered 503 with Retry-After (a held check-in a notice woke "
        "is never refused).",
    )


_WILDCARDS = frozenset({"", "0.0.0.0", "::", "[::]"})  # noqa: S104 - names, not a bind


def default_agent_url(host: str, port: int) -> str:
    """The URL agents reach a server listening on ``host``:``port`` at: that address, or the
    machine's name when it listens on every address."""
    name = socket.getfqdn() if host in _WILDCARDS else host
    if ":" in name and not name.startswith("["):
        name = f"[{name}]"  # an IPv6 literal
    return f"http://{name}:{port}"
