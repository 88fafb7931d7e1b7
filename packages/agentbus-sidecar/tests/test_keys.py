from __future__ import annotations

import base64
import hashlib
import json
from datetime import UTC, datetime

import pytest
from agentbus_sidecar.keys import (
    b64url_decode,
    fingerprint,
    generate_key,
    key_proof,
    load_private_key,
    private_key_pem,
    public_key_b64url,
    public_key_from_b64url,
)
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec


def _raw_seed(key: object) -> bytes:
    return key.private_bytes(  # type: ignore[attr-defined,no-any-return]
        serialization.Encoding.Raw,
        serialization.PrivateFormat.Raw,
        serialization.NoEncryption(),
    )


def test_pem_and_raw_forms_load_the_same_key() -> None:
    key = generate_key()
    seed = _raw_seed(key)
    for text in (
        private_key_pem(key),
        base64.b64encode(seed).decode(),
        base64.urlsafe_b64encode(seed).rstrip(b"=").decode(),
    ):
        assert public_key_b64url(load_private_key(text)) == public_key_b64url(key)


def test_unusable_keys_are_refused() -> None:
    with pytest.raises(ValueError, match="32 bytes"):
        load_private_key(base64.b64encode(b"short").decode())
    with pytest.raises(ValueError, match="neither PEM nor base64"):
        load_private_key("not base64 at all!")
    other = ec.generate_private_key(ec.SECP256R1()).private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    with pytest.raises(ValueError, match="not an Ed25519"):
        load_private_key(other.decode())


def test_public_key_and_fingerprint_forms() -> None:
    key = generate_key()
    text = public_key_b64url(key)
    assert len(text) == 43
    assert "=" not in text
    raw = b64url_decode(text)
    assert (
        fingerprint(key)
        == base64.urlsafe_b64encode(hashlib.sha256(raw).digest()).rstrip(b"=").decode()
    )
    assert public_key_b64url(public_key_from_b64url(text)) == text


def test_key_proof_is_a_compact_jws_signed_by_the_key() -> None:
    key = generate_key()
    now = datetime(2026, 10, 12, 9, 30, tzinfo=UTC)
    proof = key_proof(key, "agt_01a12f571a807d10b5e6f7a8b9c0d1e2", now, "key_0123")
    header_b64, claims_b64, sig_b64 = proof.split(".")
    header = json.loads(b64url_decode(header_b64))
    claims = json.loads(b64url_decode(claims_b64))
    assert header == {"alg": "EdDSA", "typ": "agentbus-key-proof+jwt", "kid": "key_0123"}
    assert claims["iss"] == claims["sub"] == "agt_01a12f571a807d10b5e6f7a8b9c0d1e2"
    assert claims["aud"] == "agentbus-gateway"
    assert claims["iat"] == int(now.timestamp())
    assert claims["exp"] - claims["iat"] == 60
    assert len(claims["jti"]) == 32
    key.public_key().verify(b64url_decode(sig_b64), f"{header_b64}.{claims_b64}".encode())
    registration = key_proof(key, "agent://acme/platform/planner", now)
    assert "kid" not in json.loads(b64url_decode(registration.split(".")[0]))
