"""credentials.json: gateway URL, integration token or agent credential, address, agent key.

The file lives at ``$XDG_CONFIG_HOME/agentbus/credentials.json`` (data model §7), apart from
``state.db``, with mode 0600 in a 0700 folder. A file that group or others can access is refused
rather than read, since the key in it may already have leaked. Writes go to a temporary file
created 0600 and are renamed over the old one, so a crash never leaves half a file, nor a moment
at which the secrets are readable by others. The secrets are kept out of ``repr``.
"""

from __future__ import annotations

import json
import os
import re
import stat
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from agentbus_sidecar.addresses import parse_address
from agentbus_sidecar.errors import ConfigError
from agentbus_sidecar.keys import load_private_key

__all__ = [
    "AgentCredential",
    "Credentials",
    "check_gateway_url",
    "check_integration_token",
    "default_credentials_path",
    "load_credentials",
    "save_credentials",
]

_TOKEN = re.compile(r"^ab_(live|test)_[A-Za-z0-9]{40}$")
_LOOPBACK = {"localhost", "127.0.0.1", "::1"}


@dataclass
class AgentCredential:
    """A short-lived agent JWT (04-API-SPEC.md §3) cached between commands."""

    access_token: str = field(repr=False)
    expires_at: str
    expires_in: int


@dataclass
class Credentials:
    gateway_url: str
    address: str
    private_key: str = field(repr=False)
    integration_token: str | None = field(default=None, repr=False)
    agent_credential: AgentCredential | None = field(default=None, repr=False)
    agent_id: str | None = None
    key_id: str | None = None
    key_expires_at: str | None = None
    # a key made for a rotation the gateway may not have taken yet (``rotation``)
    next_private_key: str | None = field(default=None, repr=False)

    def signing_key(self) -> Ed25519PrivateKey:
        try:
            return load_private_key(self.private_key)
        except ValueError as exc:
            raise ConfigError(f"the agent key in the credentials file is unusable: {exc}") from exc

    @property
    def token_hint(self) -> str | None:
        """Enough of the token to recognise it (its display prefix and last 4), never more."""
        token = self.integration_token
        return f"{token[:14]}...{token[-4:]}" if token else None


def check_gateway_url(url: str) -> str:
    parts = urlsplit(url.strip())
    host = parts.hostname or ""
    if parts.scheme == "https" or (parts.scheme == "http" and host in _LOOPBACK):
        return url.strip().rstrip("/")
    raise ConfigError(f"gateway URL {url!r} must be https:// (plain http only on loopback)")


def check_integration_token(token: str) -> str:
    if not _TOKEN.match(token.strip()):
        raise ConfigError("an integration token is ab_live_ or ab_test_ and 40 letters or digits")
    return token.strip()


def default_credentials_path() -> Path:
    if explicit := os.environ.get("AGENTBUS_CREDENTIALS"):
        return Path(explicit)
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "agentbus" / "credentials.json"


def load_credentials(path: Path) -> Credentials:
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        raise ConfigError(f"no credentials at {path}; run `agentbus init`") from None
    if os.name == "posix" and mode & 0o077:
        raise ConfigError(
            f"refusing to read {path}: mode {stat.S_IMODE(mode):04o} lets group or others in; "
            f"run `chmod 600 {path}` (and rotate the key and token if others may have read it)"
        )
    try:
        raw: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
        cached = raw.get("agent_credential")
        creds = Credentials(
            gateway_url=raw["gateway_url"],
            address=raw["address"],
            private_key=raw["private_key"],
            integration_token=raw.get("integration_token"),
            agent_credential=AgentCredential(**cached) if cached else None,
            agent_id=raw.get("agent_id"),
            key_id=raw.get("key_id"),
            key_expires_at=raw.get("key_expires_at"),
            next_private_key=raw.get("next_private_key"),
        )
        parse_address(creds.address)
    except (ValueError, KeyError, TypeError) as exc:
        raise ConfigError(f"credentials file {path} is malformed: {exc}") from None
    return creds


def save_credentials(path: Path, creds: Credentials) -> None:
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    body = {k: v for k, v in asdict(creds).items() if v is not None}
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".credentials-", suffix=".tmp")
    try:
        os.fchmod(fd, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(body, handle, indent=2, sort_keys=True)
            handle.write("\n")
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    os.chmod(path, 0o600)
