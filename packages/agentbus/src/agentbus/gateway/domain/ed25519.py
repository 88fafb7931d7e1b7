"""Ed25519 for the work every message pays: verifying its envelope's signature on the way in,
signing its receipt on the way out. Both go through libsodium (PyNaCl) rather than OpenSSL
(``cryptography``), which keeps every other use: key parsing, JWTs, wrapping. On the reference
machine libsodium verifies in 54 µs and signs in 20 µs, OpenSSL in 118 and 34 µs
(docs/decisions/0011). Ed25519 is deterministic, so a signature made here is byte for byte the
one ``cryptography`` would make, and the sidecar, which signs and verifies with
``cryptography``, cannot tell them apart.
"""

from __future__ import annotations

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from nacl import bindings
from nacl.exceptions import BadSignatureError, CryptoError

SIGNATURE_BYTES = bindings.crypto_sign_BYTES
PUBLIC_KEY_BYTES = bindings.crypto_sign_PUBLICKEYBYTES


def verify(public_key: bytes, signature: bytes, message: bytes) -> bool:
    """Whether ``signature`` is ``public_key``'s over ``message``; a malformed key or signature
    is a signature that does not verify."""
    if len(public_key) != PUBLIC_KEY_BYTES or len(signature) != SIGNATURE_BYTES:
        return False
    try:
        bindings.crypto_sign_open(signature + message, public_key)
    except (BadSignatureError, CryptoError, ValueError):
        return False
    return True


class Signer:
    """One private key, held in libsodium's form."""

    def __init__(self, key: Ed25519PrivateKey) -> None:
        _public, self._secret = bindings.crypto_sign_seed_keypair(key.private_bytes_raw())

    def __repr__(self) -> str:
        return "Signer(...)"

    def sign(self, message: bytes) -> bytes:
        signed: bytes = bindings.crypto_sign(message, self._secret)
        return signed[:SIGNATURE_BYTES]
