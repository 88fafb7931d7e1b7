"""The gateway's settings: environment variables prefixed AGENTBUS_, overridable by CLI flags.

Per-tenant settings live in the database (``tenants.settings``), never here.
"""

from __future__ import annotations

from pathlib import Path

import platformdirs
from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict


def default_config_dir() -> Path:
    return Path(platformdirs.user_config_dir("agentbus"))


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="AGENTBUS_", extra="ignore")

    database_url: SecretStr | None = Field(
        None,
        description="Administrative PostgreSQL URL of the agentbus database; unset starts the "
        "embedded server and creates the database there.",
    )
    app_password: SecretStr | None = Field(
        None,
        description="Password of the agentbus_app login role, set by migrate; unset leaves "
        "the role without one (enough for the embedded server's local trust login).",
    )
    config_dir: Path = Field(
        default_factory=default_config_dir,
        description="Where the gateway keeps its files (the deployment keyring).",
    )
    keyring_path: Path | None = Field(
        None,
        description="Deployment keyring wrapping tenant data keys (mode 0600); default "
        "<config_dir>/keyring.json, created on first use.",
    )
    kms_aws_region: str | None = Field(
        None,
        description="AWS region of tenants' own KMS keys (bring your own key); unset, no tenant "
        "may register an AWS KMS key. Credentials come from boto3's usual chain.",
    )
    kms_aws_endpoint_url: str | None = Field(
        None, description="AWS KMS endpoint, for a VPC endpoint or a test server."
    )
    unwrapped_key_ttl_s: float = Field(
        600.0,
        gt=0,
        le=3600,
        description="How long an unwrapped tenant data key is reused; a revoked BYOK key stops "
        "opening payloads within this long.",
    )
    partitions_months_ahead: int = Field(
        3, ge=0, le=36, description="Monthly messages partitions kept ahead of the current one."
    )

    @property
    def resolved_keyring_path(self) -> Path:
        return self.keyring_path or self.config_dir / "keyring.json"
