"""Bearer secrets for browser sessions and one-time links, the same way in every system.

A credential is ``<tenant>.<id>.<secret>``: the tenant (a UUID, hex) lets the lookup run in the
tenant's scope under RLS, the id (a UUID, hex) finds the row by primary key, and the 32-byte
random secret proves possession. The row keeps ``SHA-256(secret)`` only, compared in constant
time. A form's CSRF token is ``HMAC-SHA256(secret, "csrf")``: bound to the session, never
stored, and useless without the cookie it derives from.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import uuid
from dataclasses import dataclass

__all__ = ["Credential", "csrf_token", "csrf_valid", "digest", "matches", "mint", "parse"]


@dataclass(frozen=True)
class Credential:
    tenant_id: uuid.UUID
    id: uuid.UUID
    secret: str

    def __str__(self) -> str:
        return f"{self.tenant_id.hex}.{self.id.hex}.{self.secret}"


def mint(tenant_id: uuid.UUID, row_id: uuid.UUID) -> Credential:
    return Credential(tenant_id, row_id, secrets.token_urlsafe(32))


def parse(text: str | None) -> Credential | None:
    """The credential in ``text``, or None for anything malformed (never an error)."""
    if not text or len(text) > 200:
        return None
    parts = text.split(".")
    if len(parts) != 3 or not 40 <= len(parts[2]) <= 64:
        return None
    try:
        return Credential(uuid.UUID(hex=parts[0]), uuid.UUID(hex=parts[1]), parts[2])
    except ValueError:
        return None


def digest(secret: str) -> bytes:
    return hashlib.sha256(secret.encode()).digest()


def matches(stored: bytes, secret: str) -> bool:
    return hmac.compare_digest(stored, digest(secret))


def csrf_token(secret: str) -> str:
    return hmac.new(secret.encode(), b"csrf", hashlib.sha256).hexdigest()


def csrf_valid(secret: str, candidate: str | None) -> bool:
    return candidate is not None and hmac.compare_digest(
        csrf_token(secret).encode(), candidate.encode()
    )
