"""libsodium's Ed25519 on the per-message path answers exactly as ``cryptography`` does: the
same signatures, and the same verdicts on good and tampered ones."""

from __future__ import annotations

from agentbus.gateway.domain import ed25519
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from hypothesis import given, settings
from hypothesis import strategies as st

seeds = st.binary(min_size=32, max_size=32)
messages = st.binary(max_size=2048)


def _openssl_verifies(public: bytes, signature: bytes, message: bytes) -> bool:
    try:
        Ed25519PublicKey.from_public_bytes(public).verify(signature, message)
    except InvalidSignature:
        return False
    return True


@settings(max_examples=200)
@given(seed=seeds, message=messages)
def test_signatures_are_the_ones_openssl_makes_and_both_verify_them(
    seed: bytes, message: bytes
) -> None:
    key = Ed25519PrivateKey.from_private_bytes(seed)
    public = key.public_key().public_bytes_raw()
    signature = ed25519.Signer(key).sign(message)
    assert signature == key.sign(message)
    assert ed25519.verify(public, signature, message)
    assert _openssl_verifies(public, signature, message)


@settings(max_examples=200)
@given(seed=seeds, message=messages, where=st.integers(min_value=0), bit=st.integers(0, 7))
def test_a_changed_bit_fails_both_alike(seed: bytes, message: bytes, where: int, bit: int) -> None:
    key = Ed25519PrivateKey.from_private_bytes(seed)
    public = key.public_key().public_bytes_raw()
    signed = bytearray(key.sign(message) + message)
    signed[where % len(signed)] ^= 1 << bit
    signature, changed = bytes(signed[:64]), bytes(signed[64:])
    assert ed25519.verify(public, signature, changed) is False
    assert _openssl_verifies(public, signature, changed) is False


def test_malformed_keys_and_signatures_do_not_verify() -> None:
    key = Ed25519PrivateKey.generate()
    public = key.public_key().public_bytes_raw()
    signature = key.sign(b"m")
    assert not ed25519.verify(public[:31], signature, b"m")
    assert not ed25519.verify(public, signature[:63], b"m")
    assert not ed25519.verify(public, signature + b"\0", b"m")
    assert not ed25519.verify(b"\0" * 32, signature, b"m")  # a small-order point
    assert not ed25519.verify(public, b"\0" * 64, b"m")
    assert ed25519.verify(public, signature, b"m")
