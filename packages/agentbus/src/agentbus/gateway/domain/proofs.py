"""Key proofs (04-API-SPEC §1.2): a compact JWS an agent signs with its Ed25519 key to prove it
holds it, on registration (``sub`` = the address, no ``kid``, the key is the body's) and on
credential issue and refresh (``sub`` = the agent id, ``kid`` = the ``key_`` id).

Checks: header ``alg: EdDSA`` and ``typ: agentbus-key-proof+jwt``; signature (AB-1009); ``iss``
= ``sub`` = the expected subject and ``aud = agentbus-gateway`` (AB-1009); ``iat`` within 60 s
of gateway time (AB-1012); ``exp - iat <= 60`` and not past (AB-1009); ``jti`` never seen in
the last 120 s on this instance (AB-1011).
"""

from __future__ import annotations

import time
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from agentbus.gateway.domain.errors import ClockSkew, KeyProofInvalid, ProofReplayed

PROOF_TYPE = "agentbus-key-proof+jwt"
AUDIENCE = "agentbus-gateway"
MAX_SKEW_S = 60
MAX_LIFETIME_S = 60
REMEMBER_S = 120


class ProofReplayCache:
    """``jti`` values seen in the last ``REMEMBER_S`` seconds (per gateway instance)."""

    def __init__(self, remember_s: float = REMEMBER_S) -> None:
        self.remember_s = remember_s
        self._seen: dict[str, float] = {}

    def remember(self, jti: str, now: float) -> None:
        if len(self._seen) > 1000:
            self._seen = {k: t for k, t in self._seen.items() if t > now}
        if self._seen.get(jti, 0.0) > now:
            raise ProofReplayed("this key proof was already used")
        self._seen[jti] = now + self.remember_s


def proof_header(proof: str) -> dict[str, Any]:
    try:
        header = jwt.get_unverified_header(proof)
    except jwt.InvalidTokenError as exc:
        raise KeyProofInvalid("the key proof is not a compact JWS") from exc
    if header.get("alg") != "EdDSA" or header.get("typ") != PROOF_TYPE:
        raise KeyProofInvalid(f"a key proof has alg EdDSA and typ {PROOF_TYPE}")
    return header


def verify_key_proof(
    proof: str,
    key: Ed25519PublicKey,
    *,
    subject: str,
    replay: ProofReplayCache,
    now: float | None = None,
) -> dict[str, Any]:
    """The proof's claims, once every check above has passed."""
    if not isinstance(proof, str):
        raise KeyProofInvalid("proof is missing")
    proof_header(proof)
    now = time.time() if now is None else now
    try:
        claims: dict[str, Any] = jwt.decode(
            proof,
            key,
            algorithms=["EdDSA"],
            audience=AUDIENCE,
            options={
                "require": ["iss", "sub", "aud", "iat", "exp", "jti"],
                "verify_exp": False,
                "verify_iat": False,
                "verify_nbf": False,
            },
        )
    except jwt.InvalidTokenError as exc:
        raise KeyProofInvalid(f"key proof does not verify: {exc}") from exc
    if claims["iss"] != subject or claims["sub"] != subject:
        raise KeyProofInvalid("the key proof names another subject", expected=subject)
    iat, exp, jti = claims["iat"], claims["exp"], claims["jti"]
    if not all(type(v) is int for v in (iat, exp)) or not isinstance(jti, str) or not jti:
        raise KeyProofInvalid("iat and exp are integers, jti a non-empty string")
    if abs(now - iat) > MAX_SKEW_S:
        raise ClockSkew("key proof iat is more than 60 s from gateway time", server_time=int(now))
    if not 0 < exp - iat <= MAX_LIFETIME_S or exp < now - 5:
        raise KeyProofInvalid("key proof lifetime is at most 60 s and must not be over")
    replay.remember(f"{subject}:{jti}", now)
    return claims
