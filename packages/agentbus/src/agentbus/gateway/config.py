"""The gateway's settings: the admin tree of ``agentbus.settings`` plus serving, NATS, the object
store and the background loops. Environment names follow the field (``AGENTBUS_PORT``...);
``AGENTBUS_NATS_URL`` falls back to ``PLATFORMKIT_NATS_URL``, which ``stack up`` sets, and the
embedded NATS server's port and store to ``PLATFORMKIT_NATS_PORT`` and ``PLATFORMKIT_NATS_STORE``.
"""

from __future__ import annotations

from pathlib import Path

from platformkit.mail import Mailer, SmtpSecurity, mailer_for
from pydantic import AliasChoices, Field, SecretStr
from pydantic_settings import SettingsConfigDict

from agentbus.gateway.store.objectstore import REQUEST_TIMEOUT_S
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
    audit_interval_s: float = Field(
        2.0,
        gt=0,
        description="How often the audit job publishes new chain rows on sys.audit.> "
        "and looks for chains due a checkpoint.",
    )
    audit_checkpoint_interval_s: float = Field(
        3600.0,
        gt=0,
        description="A tenant chain with new rows gets a signed checkpoint at least this often.",
    )
    audit_checkpoint_rows: int = Field(
        1000, ge=1, description="... and at the latest after this many new rows (data model §2.5)."
    )
    signing_refresh_s: float = Field(
        60.0,
        gt=0,
        description="How often each process re-reads the platform signing keys "
        "(new ones sign, retired ones stop being accepted).",
    )
    public_url: str | None = Field(
        None,
        description="How people and browsers reach the gateway (https://bus.example.com), for "
        "links in mails and the console link serve prints (default: http://<host>:<port>); "
        "an https URL makes the console's cookies Secure.",
    )
    mail_from: str = Field("agentbus@localhost", description="Sender of invitation mails.")
    smtp_host: str | None = Field(
        None, description="SMTP server for mails; unset writes them into the outbox folder."
    )
    smtp_port: int | None = Field(None, description="Its port (default by smtp_security).")
    smtp_security: SmtpSecurity = Field(SmtpSecurity.STARTTLS, description="none, starttls or tls.")
    smtp_username: str | None = Field(None, description="SMTP login, when the server wants one.")
    smtp_password: SecretStr | None = Field(None, description="SMTP password.")
    outbox_dir: Path | None = Field(
        None, description="Where mails go without SMTP (default: <config_dir>/outbox)."
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
    analytics: bool = Field(
        True,
        description="Open the analytics store in this process and, as the leader, drain the "
        "analytics outbox into it; off, the outbox keeps its rows for a process that does.",
    )
    analytics_url: SecretStr | None = Field(
        None,
        description="A ClickHouse server for analytics, as a clickhouse-connect DSN "
        "(http://user:password@host:8123/agentbus); unset keeps them in chDB inside the gateway "
        "process, under <config_dir>/analytics (one owner process: docs/decisions/0050).",
    )
    analytics_dir: Path | None = Field(
        None, description="chDB's data directory; default <config_dir>/analytics."
    )
    analytics_cluster: str | None = Field(
        None,
        description="ClickHouse cluster name for ON CLUSTER and replicated engines (data model "
        "2.1); unset for chDB and a single server.",
    )
    analytics_tiered: bool = Field(
        False,
        description="The ClickHouse server has the 'tiered' storage policy of data model 2.2 "
        "(hot disk, cold S3 volume); rows move to 'cold' after 30 days.",
    )
    analytics_flush_s: float = Field(
        1.0, gt=0, le=60, description="How often the analytics outbox is drained into ClickHouse."
    )
    analytics_batch: int = Field(
        10_000, ge=1, le=100_000, description="Rows per ClickHouse insert (data model 2.1)."
    )
    delivery_slo_ms: int = Field(
        1000, ge=1, description="The delivery latency objective the latency report compares to."
    )
    secure_cookies: bool = Field(
        False, description="Mark the console's cookies Secure even when served over plain HTTP."
    )
    request_rate_limits: bool = Field(
        True,
        description="Enforce the request rates of 04-API-SPEC 1.6 (AB-5008); off only for load "
        "tests, which send one agent more requests than any agent should.",
    )

    @property
    def base_url(self) -> str:
        return (self.public_url or f"http://{self.host}:{self.port}").rstrip("/")

    def mailer(self) -> Mailer:
        return mailer_for(
            outbox=self.outbox_dir or self.config_dir / "outbox", sender=self.mail_from,
            smtp_host=self.smtp_host, smtp_port=self.smtp_port, security=self.smtp_security,
            username=self.smtp_username,
            password=self.smtp_password.get_secret_value() if self.smtp_password else None,
        )  # fmt: skip

    @property
    def objects_dir(self) -> Path:
        return self.config_dir / "objects"

    @property
    def resolved_analytics_dir(self) -> Path:
        return self.analytics_dir or self.config_dir / "analytics"
