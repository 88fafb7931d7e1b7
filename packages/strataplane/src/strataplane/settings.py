"""The server's settings: environment variables prefixed STRATAPLANE_, overridable by CLI flags.

Per-tenant settings live in the database (tenant.limits), never here.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="STRATAPLANE_", extra="ignore")

    database_url: SecretStr | None = Field(
        default=None,
        description="Administrative PostgreSQL URL of the strataplane database; unset starts "
        "the embedded server and creates the database on it.",
    )
    database_app_password: SecretStr | None = Field(
        default=None,
        description="Password of the strataplane_app login role, set by migrate; needed only "
        "where the server requires password authentication.",
    )
    host: str = Field(default="127.0.0.1", description="Address the server listens on.")
    port: int = Field(default=7800, description="Port the server listens on.")
    workers: int = Field(default=1, description="Server worker processes.")
    backlog: int = Field(default=4096, ge=128, description="Listen queue of the server socket.")
    backpressure: int = Field(
        default=16384,
        ge=1,
        description="Requests one worker serves at once; every agent keeps a connection open, "
        "so this is sized for a fleet rather than for browsers.",
    )
    pool_size: int = Field(default=20, description="Database connections per worker process.")
    job_concurrency: int = Field(
        default=2, description="Operations run at once per worker process."
    )
    shards: int = Field(
        default=16,
        ge=1,
        le=1024,
        description="Controller shard count, fixed in the installation row by the first serve.",
    )
    session_hours: int = Field(default=12, description="Lifetime of a web session.")
    secure_cookies: bool = Field(
        default=False,
        description="Always mark the session cookie Secure; it is anyway when a request came "
        "over https (or from a trusted proxy saying so) or public_url is https.",
    )
    public_url: str | None = Field(
        default=None,
        description="URL people use to reach the server; an https one makes the session cookie "
        "Secure.",
    )
    token_touch_seconds: int = Field(
        default=60, description="api_token.last_used_at is written at most this often per token."
    )
    catalog_trusted_keys: str = Field(
        default="",
        description=(
            "Extra Ed25519 public keys (base64 of the raw 32 bytes, comma-separated) that may "
            "sign catalog bundles, beside the keys the package ships in catalog/trusted_keys.txt."
        ),
    )
    keyring_path: Path | None = Field(
        default=None,
        description="The deployment keyring file (mode 0600) whose keys wrap the tenants' data "
        "keys (docs/strataplane/secrets.md); unset: keyring.json in the user data directory, "
        "created on first use.",
    )
    audit_export_interval: float = Field(
        default=2.0,
        gt=0,
        description="Seconds between passes of the audit exporter over the tenants' audit sinks.",
    )
    audit_export_batch: int = Field(
        default=100, ge=1, le=10_000, description="Audit events sent to a sink per request."
    )
    oidc_issuer: str | None = Field(
        default=None,
        description="Issuer URL of the OpenID Connect provider people sign in with "
        "(docs/strataplane/sign-in.md); unset: local users only. https, or http to loopback.",
    )
    oidc_client_id: str | None = Field(
        default=None, description="This server's client id at the OIDC provider."
    )
    oidc_client_secret: SecretStr | None = Field(
        default=None, description="This server's client secret at the OIDC provider."
    )
    oidc_tenant: str | None = Field(
        default=None,
        description="Slug of the tenant a person signing in through OIDC becomes a member of "
        "(source oidc) at the first login.",
    )
    oidc_groups_claim: str = Field(
        default="groups",
        description="ID token claim listing the person's groups; each is matched with the "
        "external_id of the tenant's oidc teams at every login.",
    )
    oidc_scopes: str = Field(
        default="openid email profile groups",
        description="Scopes asked of the provider, space-separated.",
    )
    oidc_label: str = Field(
        default="Single sign-on", description="The sign-in page's name for the provider."
    )
