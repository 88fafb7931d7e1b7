"""Settings of the agent-facing side, environment variables prefixed STRATAPLANE_FLEET_."""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class FleetSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="STRATAPLANE_FLEET_", extra="ignore")

    agent_url: str = Field(
        default="http://127.0.0.1:7800",
        description="server.agent_url: the base URL agents reach this server at; rendered into "
        "every artifact (heartbeat and secret store URLs).",
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
