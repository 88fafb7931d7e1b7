"""The gateway's settings: the admin tree of ``agentbus.settings`` plus serving, NATS, the object
store and the background loops. Environment names follow the field (``AGENTBUS_PORT``...);
``AGENTBUS_NATS_URL`` falls back to ``PLATFORMKIT_NATS_URL``, which ``stack up`` sets, and the
embedded NATS server's port and store to ``PLATFORMKIT_NATS_PORT`` and ``PLATFORMKIT_NATS_STORE``.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import AliasChoices, Field, SecretStr
from pydantic_settings import SettingsConfigDict

from agentbus.gateway.objectstore import REQUEST_TIMEOUT_S
from agentbus.settings import Settings

DEFAULT_PORT = 7900
DEFAULT_NATS_PORT = 44222


class GatewaySettings(Settings):
    model_config = SettingsConfigDict(populate_by_name=True)

    host: str = Field("127.0.0.1", description="Address the HTTP server listens on.")
    port: int = Field(DEFAULT_PORT, ge=1, le=65535, description="HTTP port of the gateway.")
    workers: int = Field(1, ge=1, le=64, description="granian worker processes.")
    nats_url: str | None = Field(
        None,
        validation_alias=AliasChoices("AGENTBUS_NATS_URL", "PLATFORMKIT_NATS_URL"),
        description="NATS server with JetStream; unset starts the embedded one on nats_port.",
    )
    nats_port: int = Field(
        DEFAULT_NATS_PORT,
        ge=1,
        le=65535,
        validation_alias=AliasChoices("AGENTBUS_NATS_PORT", "PLATFORMKIT_NATS_PORT", "nats_port"),
        description="Port of the embedded NATS server (also read from PLATFORMKIT_NATS_PORT).",
    )
    nats_store: Path | None = Field(
        None,
        validation_alias=AliasChoices(
            "AGENTBUS_NATS_STORE", "PLATFORMKIT_NATS_STORE", "nats_store"
        ),
        description="Store folder of the embedded NATS server (also read from "
        "PLATFORMKIT_NATS_STORE); unset, the kernel's default under the user data folder.",
    )
    stream_replicas: int = Field(
        1, ge=1, le=5, description="Replicas of each tenant stream (3 in production)."
    )
    publish_timeout_s: float = Field(
        2.0, gt=0, le=30, description="How long a send waits for the JetStream PubAck."
    )
    object_store_url: str | None = Field(
        None,
        description="Payload store, e.g. s3://bucket/prefix (credentials from the usual AWS_* "
        "variables); unset keeps objects under <config_dir>/objects.",
    )
    object_store_timeout_s: float = Field(
        REQUEST_TIMEOUT_S,
        gt=0,
        le=300,
        description="How long one request to the configured object store may take (a send "
        "waits for its payload's put; past it, AB-9004).",
    )
    inline_payloads: bool = Field(
        False,
        description="Also carry each payload whose sealed form is under 64 KiB inside its "
        "JetStream message, so a delivery reads no object (the store keeps the copy of record).",
    )
    reconcile_interval_s: float = Field(
        10.0, gt=0, description="How often the reconciler looks for unpublished messages."
    )
    reconcile_min_age_s: float = Field(
        10.0, ge=0, description="Unpublished rows younger than this are left to their sender."
    )
    reconcile_shards: int = Field(
        1, ge=1, le=1024, description="Leader shards of the reconciler (tenant hash modulo)."
    )
    platform_token: SecretStr | None = Field(
        None,
        min_length=32,
        description="The platform operator's bearer for POST and GET /v1/tenants (32 characters "
        "or more); unset, those routes refuse every caller.",
    )
    background: bool = Field(
        True, description="Run the background loops (reconciler, partitions) in this process."
    )
    request_rate_limits: bool = Field(
        True,
        description="Enforce the request rates of 04-API-SPEC 1.6 (AB-5008); off only for load "
        "tests, which send one agent more requests than any agent should.",
    )

    @property
    def objects_dir(self) -> Path:
        return self.config_dir / "objects"
