"""The agent's Ed25519 key: generation, PEM or raw storage, fingerprints and key proofs.

A key proof (04-API-SPEC.md §1.2) is a compact JWS the agent signs to prove it holds its key,
sent when registering and when asking for an agent credential.
"""

from __future__ import annotations

import base64
import hashlib
import secrets
from datetime import datetime

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from wirekit.canonical import canonical_json

from agentbus_sidecar.clock import to_ms

__all__ = [
    "b64url_decode",
    "b64url_encode",
    "fingerprint",
    "generate_key",
    "key_proof",
    "load_private_key",
    "private_key_pem",
    "public_key_b64url",
    "public_key_from_b64url",
]

PROOF_TYPE = "agentbus-key-proof+jwt"
AUDIENCE = "agentbus-gateway"
PROOF_LIFETIME_S = 60


def b64url_encode(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def b64url_decode(text: str) -> bytes:
    if "=" in text:
        raise ValueError("base64url here is written without padding")
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def generate_key() -> Ed25519PrivateKey:
    return Ed25519PrivateKey.generate()


def private_key_pem(key: Ed25519PrivateKey) -> str:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode("ascii")


def load_private_key(text: str) -> Ed25519PrivateKey:
    """Load a PKCS#8 PEM key, or the 32-byte raw seed in base64 or base64url."""
    text = text.strip()
    if text.startswith("-----BEGIN"):
        key = serialization.load_pem_private_key(text.encode("ascii"), password=None)
        if not isinstance(key, Ed25519PrivateKey):
            raise ValueError("the PEM key is not an Ed25519 key")
        return key
    try:
        padded = text.replace("-", "+").replace("_", "/") + "=" * (-len(text) % 4)
        raw = base64.b64decode(padded, validate=True)
    except ValueError as exc:
        raise ValueError("the key is neither PEM nor base64") from exc
    if len(raw) != 32:
        raise ValueError(f"a raw Ed25519 key is 32 bytes, this one is {len(raw)}")
    return Ed25519PrivateKey.from_private_bytes(raw)


def _raw_public(key: Ed25519PrivateKey | Ed25519PublicKey) -> bytes:
    public = key.public_key() if isinstance(key, Ed25519PrivateKey) else key
    return public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def public_key_b64url(key: Ed25519PrivateKey | Ed25519PublicKey) -> str:
    """Public keys travel as base64url of the 32 raw bytes (conventions §5.3)."""
    return b64url_encode(_raw_public(key))


def public_key_from_b64url(text: str) -> Ed25519PublicKey:
    raw = b64url_decode(text)
    if len(raw) != 32:
        raise ValueError(f"an Ed25519 public key is 32 bytes, this one is {len(raw)}")
    return Ed25519PublicKey.from_public_bytes(raw)


def fingerprint(key: Ed25519PrivateKey | Ed25519PublicKey) -> str:
    """SHA-256 of the raw public key, base64url without padding: 43 characters."""
    return b64url_encode(hashlib.sha256(_raw_public(key)).digest())


def key_proof(key: Ed25519PrivateKey, subject: str, now: datetime, kid: str | None = None) -> str:
    """Compact JWS proving possession of ``key``.

    ``subject`` is the agent id, or for registration the address being registered; ``kid`` is
    the ``key_`` id once the gateway has assigned one (registration has none).
    """
    header: dict[str, str] = {"alg": "EdDSA", "typ": PROOF_TYPE}
    if kid is not None:
        header["kid"] = kid
    iat = to_ms(now) // 1000
    claims = {
        "iss": subject,
        "sub": subject,
        "aud": AUDIENCE,
        "iat": iat,
        "exp": iat + PROOF_LIFETIME_S,
        "jti": secrets.token_hex(16),
    }
    signing_input = (
        b64url_encode(canonical_json(header)) + "." + b64url_encode(canonical_json(claims))
    )
    signature = key.sign(signing_input.encode("ascii"))
    return signing_input + "." + b64url_encode(signature)
