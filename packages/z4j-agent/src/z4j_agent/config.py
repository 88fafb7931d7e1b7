"""Agent settings, read from the environment (``Z4J_*``) or from Celery's ``app.conf`` (``z4j_*``).

The environment wins over ``app.conf`` so that an operator can override a value baked into an
application's settings. Errors name the setting and what it must be, and never echo the token or
the HMAC secret.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit, urlunsplit

from z4j_agent.protocol import MAX_BATCH_EVENTS, decode_secret


class ConfigError(ValueError):
    """A setting is missing or invalid; the message says which one and how to fix it."""


@dataclass(frozen=True)
class AgentConfig:
    brain_url: str
    token: str = field(repr=False)
    hmac_secret: bytes = field(repr=False)
    buffer_path: Path | None = None
    buffer_max_events: int = 100_000
    batch_size: int = 500
    flush_interval: float = 1.0
    transport: Literal["ws", "http"] = "ws"
    redact_keys: tuple[str, ...] = ()

    @property
    def ws_url(self) -> str:
        scheme = "wss" if self.brain_url.startswith("https:") else "ws"
        return scheme + self.brain_url[self.brain_url.index(":") :] + "/ws/agent"

    def http_url(self, path: str) -> str:
        return self.brain_url + path

    def buffer_file(self, name: str) -> Path:
        """The buffer file for ``name``: Z4J_BUFFER_PATH itself, or a file in that directory (a
        path ending in a slash or an existing directory), or one under the user's state dir."""
        safe = re.sub(r"[^A-Za-z0-9_.@-]+", "_", name)[:100] or "agent"
        path = self.buffer_path
        if path is None:
            return default_state_dir() / f"{safe}.sqlite3"
        if path.is_dir() or str(path).endswith(os.sep):
            return path / f"{safe}.sqlite3"
        return path


def default_state_dir() -> Path:
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "z4j-agent"


_SETTINGS = (
    "brain_url",
    "token",
    "hmac_secret",
    "buffer_path",
    "buffer_max_events",
    "batch_size",
    "flush_interval",
    "transport",
    "redact_keys",
)


def load_config(env: Mapping[str, str] | None = None, celery_conf: Any = None) -> AgentConfig:
    """Build the configuration from ``env`` (default ``os.environ``) and ``celery_conf``."""
    env = os.environ if env is None else env
    raw: dict[str, Any] = {}
    for name in _SETTINGS:
        value: Any = env.get(f"Z4J_{name.upper()}")
        if value in (None, "") and celery_conf is not None:
            value = celery_conf.get(f"z4j_{name}")
        if value not in (None, ""):
            raw[name] = value
    return AgentConfig(
        brain_url=_brain_url(raw.get("brain_url")),
        token=_token(raw.get("token")),
        hmac_secret=_secret(raw.get("hmac_secret")),
        buffer_path=Path(str(raw["buffer_path"])).expanduser() if "buffer_path" in raw else None,
        buffer_max_events=_number(raw, "buffer_max_events", int, 100_000, 100, 100_000_000),
        batch_size=_number(raw, "batch_size", int, 500, 1, MAX_BATCH_EVENTS),
        flush_interval=_number(raw, "flush_interval", float, 1.0, 0.01, 300.0),
        transport=_transport(raw.get("transport", "ws")),
        redact_keys=_keys(raw.get("redact_keys", ())),
    )


def _brain_url(value: Any) -> str:
    if value is None:
        raise ConfigError(
            "Z4J_BRAIN_URL is not set: give the brain's base URL, "
            "e.g. http://127.0.0.1:7700 (or app.conf.z4j_brain_url)"
        )
    parts = urlsplit(str(value).strip())
    scheme = {"ws": "http", "wss": "https"}.get(parts.scheme, parts.scheme)
    if scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(
            "Z4J_BRAIN_URL must be an http(s):// or ws(s):// URL with a host, "
            f"e.g. http://127.0.0.1:7700, got {str(value)[:200]!r}"
        )
    if parts.username or parts.password or parts.query or parts.fragment:
        raise ConfigError(
            "Z4J_BRAIN_URL must not carry credentials, a query or a fragment: "
            "the token goes in Z4J_TOKEN"
        )
    return urlunsplit((scheme, parts.netloc, parts.path.rstrip("/"), "", ""))


def _token(value: Any) -> str:
    if value is None:
        raise ConfigError(
            "Z4J_TOKEN is not set: give the agent token the brain showed once "
            "when the agent was created"
        )
    token = str(value).strip()
    if not token.isprintable() or any(ch.isspace() for ch in token) or len(token) > 4096:
        raise ConfigError("Z4J_TOKEN is malformed: it must be one printable word without spaces")
    return token


def _secret(value: Any) -> bytes:
    if value is None:
        raise ConfigError(
            "Z4J_HMAC_SECRET is not set: give the project's HMAC secret "
            "(urlsafe base64) the brain showed"
        )
    try:
        return decode_secret(str(value))
    except ValueError as exc:  # the message of decode_secret never contains the value
        raise ConfigError(f"Z4J_HMAC_SECRET is invalid: {exc}") from None


def _number[T: (int, float)](
    raw: dict[str, Any], name: str, kind: type[T], default: T, low: T, high: T
) -> T:
    if name not in raw:
        return default
    try:
        number = kind(raw[name])
    except (TypeError, ValueError):
        number = None
    if number is None or not low <= number <= high:
        what = "an integer" if kind is int else "a number"
        raise ConfigError(
            f"Z4J_{name.upper()} must be {what} between {low} and {high}, "
            f"got {str(raw[name])[:50]!r}"
        )
    return number


def _transport(value: Any) -> Literal["ws", "http"]:
    text = str(value).strip().lower()
    if text == "ws":
        return "ws"
    if text == "http":
        return "http"
    raise ConfigError(f"Z4J_TRANSPORT must be 'ws' or 'http', got {str(value)[:20]!r}")


def _keys(value: Any) -> tuple[str, ...]:
    items = value.split(",") if isinstance(value, str) else list(value)
    return tuple(str(item).strip() for item in items if str(item).strip())
