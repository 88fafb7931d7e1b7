"""The brain's settings: environment variables prefixed Z4J_, overridable by CLI flags."""

from __future__ import annotations

from pathlib import Path

import platformdirs
from platformkit.mail import SmtpSecurity
from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict


def default_config_dir() -> Path:
    return Path(platformdirs.user_config_dir("z4j"))


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="Z4J_", extra="ignore")

    database_url: SecretStr | None = Field(
        None, description="Administrative PostgreSQL URL; unset starts the embedded server."
    )
    host: str = Field("127.0.0.1", description="Address the brain listens on.")
    port: int = Field(7700, description="Port the brain listens on.")
    workers: int = Field(1, description="Server worker processes.")
    public_url: str | None = Field(
        None, description="URL people and agents use to reach the brain (for printed links)."
    )
    config_dir: Path = Field(
        default_factory=default_config_dir, description="Where the brain keeps its secrets file."
    )
    heartbeat_interval_seconds: int = Field(10, description="Heartbeat interval told to agents.")
    offline_after_seconds: int = Field(
        30, description="An agent silent this long is marked offline."
    )
    lost_after_seconds: float = Field(
        120,
        gt=0,
        description="A started task whose worker has been silent this long becomes lost.",
    )
    lost_sweep_seconds: float = Field(
        5, gt=0, description="How often one brain replica looks for lost tasks."
    )
    no_start_after_seconds: float = Field(
        60,
        gt=0,
        description="A received task pending this long with no start reported gets a notice.",
    )
    retention_interval_seconds: float = Field(
        300, ge=1, description="Pause between passes of the retention controller."
    )
    retention_batch_rows: int = Field(
        2000, ge=1, le=100_000, description="Most rows one retention delete statement removes."
    )
    retention_batch_pause_seconds: float = Field(
        0.25, ge=0, description="Pause after each retention delete statement."
    )
    alert_interval_seconds: float = Field(
        30, ge=1, description="How often one brain replica evaluates the alert rules."
    )
    alert_webhook_timeout_seconds: float = Field(
        10, gt=0, description="How long an alert webhook may take to answer."
    )
    alert_webhooks_private: bool = Field(
        False,
        description="Let alert webhooks reach loopback, private and link-local addresses.",
    )
    session_days: int = Field(14, description="Sliding lifetime of a dashboard session.")
    secure_cookies: bool = Field(False, description="Mark session cookies Secure (behind TLS).")
    mail_from: str = Field("z4j@localhost", description="Sender of invitation and reset mails.")
    smtp_host: str | None = Field(
        None, description="SMTP server for mails; unset writes them into the outbox folder."
    )
    smtp_port: int | None = Field(None, description="Its port (default by smtp_security).")
    smtp_security: SmtpSecurity = Field(
        SmtpSecurity.STARTTLS, description="none, starttls (port 587) or tls (port 465)."
    )
    smtp_username: str | None = Field(None, description="SMTP login, when the server wants one.")
    smtp_password: SecretStr | None = Field(None, description="SMTP password.")
    outbox_dir: Path | None = Field(
        None, description="Where mails go without SMTP (default: <config_dir>/outbox)."
    )

    @property
    def base_url(self) -> str:
        return self.public_url or f"http://{self.host}:{self.port}"
