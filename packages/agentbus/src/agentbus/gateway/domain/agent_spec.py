"""The body of ``POST /v1/agents`` (04-API-SPEC §2.1) and what is derived from it: the name
rules (conventions §2), the public key and its fingerprint (conventions §5.3), the A2A-style
agent card."""

from __future__ import annotations

import hashlib
import re
from datetime import datetime
from typing import Any, Literal

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from pydantic import Field

from agentbus.errors import RequestInvalid
from agentbus.gateway.api.bodies import Body
from agentbus.gateway.domain.wire import b64url_decode, b64url_encode

RESERVED_NAMES = frozenset({"system", "gateway", "agentbus", "a2a-bridge"})
CAPABILITY = r"^[a-z][a-z0-9-]*(\.[a-z][a-z0-9-]*){0,7}$"
NAME = re.compile(r"^[a-z0-9-]{3,40}$")


class Capability(Body):
    name: str = Field(max_length=100, pattern=CAPABILITY)
    version: str = Field("1", pattern=r"^[1-9][0-9]{0,5}$")
    description: str = Field("", max_length=500)


class Delivery(Body):
    strict_order: bool = False


class Registration(Body):
    workspace: str | None = None
    name: str
    display_name: str | None = Field(None, max_length=200)
    description: str = Field("", max_length=2000)
    capabilities: list[Capability] = Field(default_factory=list, max_length=50)
    harness: Literal["claude", "codex", "opencode", "gemini", "custom"] = "custom"
    harness_version: str | None = Field(None, max_length=100)
    mode: Literal["interactive", "service"] = "interactive"
    visibility: Literal["private", "workspace", "tenant", "public"] = "workspace"
    delivery: Delivery = Field(default_factory=Delivery)
    public_key: str
    host: str | None = Field(None, max_length=255)
    proof: str


def public_key_of(text: str) -> tuple[bytes, Ed25519PublicKey]:
    try:
        raw = b64url_decode(text)
        if len(raw) != 32:
            raise ValueError("an Ed25519 public key is 32 bytes")
        return raw, Ed25519PublicKey.from_public_bytes(raw)
    except ValueError as exc:
        raise RequestInvalid(
            str(exc), errors=[{"pointer": "/public_key", "reason": str(exc)}]
        ) from None


def key_usable(key: dict[str, Any], now: datetime) -> bool:
    """An ``agent_keys`` row that may sign and prove: neither revoked nor expired."""
    return key["revoked_at"] is None and key["expires_at"] > now


def fingerprint(raw_public: bytes) -> str:
    return b64url_encode(hashlib.sha256(raw_public).digest())


GENERATED_CARD_KEYS = frozenset(
    {"name", "description", "url", "version", "skills", "defaultInputModes", "defaultOutputModes"}
)


def agent_card(agent: dict[str, Any], extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """A2A-style card generated from an agent's name, display name, description, capabilities,
    harness version and address, with the user's own members (``extra``, none of the
    generated keys) beside them."""
    skills = [
        {"id": c["name"], "name": c["name"], "description": c.get("description", ""),
         "version": c.get("version", "1")}
        for c in agent["capabilities"]
    ]  # fmt: skip
    generated = {
        "name": agent["display_name"] or agent["name"],
        "description": agent["description"],
        "url": agent["address"],
        "version": agent["harness_version"] or "1",
        "skills": skills,
        "defaultInputModes": ["application/json"],
        "defaultOutputModes": ["application/json"],
    }
    return {**(extra or {}), **generated}


def card_extra(card: dict[str, Any]) -> dict[str, Any]:
    """The user's own members of a stored card."""
    return {k: v for k, v in card.items() if k not in GENERATED_CARD_KEYS}
