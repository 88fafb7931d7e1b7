"""Agent credentials (04-API-SPEC §1.2, §3): EdDSA JWTs signed by a platform signing key,
900 s, never stored. ``mint`` makes one; ``decode`` checks signature, ``kid`` (known and not
retired), ``iss``, ``aud``, ``exp``/``nbf`` with 30 s leeway and the id claims, and returns them
typed. Agent state and token revocation are checked by ``auth``, not here.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import jwt

from agentbus.gateway.actions.signing import SigningKeys
from agentbus.gateway.domain.errors import CredentialExpired, CredentialInvalid
from agentbus.gateway.domain.wire import format_ts
from agentbus.ids import InvalidId, format_id, parse_id

ISSUER = "agentbus"
AUDIENCE = "agentbus-gateway"
LIFETIME_S = 900
LEEWAY_S = 30
AGENT_SCOPES = ("send", "receive")


@dataclass(frozen=True)
class CredentialClaims:
    tenant_id: uuid.UUID
    workspace_id: uuid.UUID
    agent_id: uuid.UUID
    token_id: uuid.UUID
    key_id: uuid.UUID
    scopes: frozenset[str]
    expires_at: int


def mint(
    signing: SigningKeys,
    *,
    tenant_id: uuid.UUID,
    workspace_id: uuid.UUID,
    agent_id: uuid.UUID,
    token_id: uuid.UUID,
    key_id: uuid.UUID,
    scopes: list[str],
    now: float | None = None,
) -> dict[str, Any]:
    """The response body of §3.1: the JWT and what the sidecar needs to know about it."""
    kid, private = signing.signer()
    iat = int(time.time() if now is None else now)
    claims = {
        "iss": ISSUER,
        "aud": AUDIENCE,
        "sub": format_id("agt", agent_id),
        "ten": format_id("ten", tenant_id),
        "ws": format_id("ws", workspace_id),
        "tok": format_id("tok", token_id),
        "key": format_id("key", key_id),
        "scp": scopes,
        "iat": iat,
        "nbf": iat,
        "exp": iat + LIFETIME_S,
        "jti": uuid.uuid4().hex,
    }
    token = jwt.encode(claims, private, algorithm="EdDSA", headers={"kid": kid, "typ": "JWT"})
    return {
        "access_token": token,
        "token_type": "Bearer",
        "expires_in": LIFETIME_S,
        "expires_at": format_ts(datetime.fromtimestamp(iat + LIFETIME_S, UTC)),
        "scope": " ".join(scopes),
        "agent_id": claims["sub"],
        "key_id": claims["key"],
    }


def kid_of(token: str) -> str:
    try:
        header = jwt.get_unverified_header(token)
    except jwt.InvalidTokenError as exc:
        raise CredentialInvalid("not a JWT") from exc
    kid = header.get("kid")
    if header.get("alg") != "EdDSA" or not isinstance(kid, str):
        raise CredentialInvalid("agent credentials are EdDSA JWTs with a kid")
    return kid


VERIFIED_TTL_S = 60.0
_VERIFIED_MAX = 10000


def decode(signing: SigningKeys, token: str) -> CredentialClaims:
    """The claims of a credential that verifies with a usable key. A credential that verified
    is remembered per process for at most ``VERIFIED_TTL_S`` and never past its expiry (with the
    leeway), and only while its key is still usable, so the answer is the same as verifying it
    again: the signature and claims of an unchanged token cannot change."""
    hit = signing.verified.get(token)
    if hit is not None:
        until, hit_kid, hit_claims = hit
        if time.time() < until and signing.usable_public(hit_kid) is not None:
            cached: CredentialClaims = hit_claims
            return cached
        signing.verified.pop(token, None)
    claims = _decode(signing, token)
    if len(signing.verified) >= _VERIFIED_MAX:
        signing.verified.clear()
    until = min(time.time() + VERIFIED_TTL_S, claims.expires_at + LEEWAY_S)
    signing.verified[token] = (until, kid_of(token), claims)
    return claims


def _decode(signing: SigningKeys, token: str) -> CredentialClaims:
    kid = kid_of(token)
    key = signing.usable_public(kid)
    if key is None:
        raise CredentialInvalid("the credential's signing key is unknown or retired")
    try:
        claims = jwt.decode(
            token,
            key,
            algorithms=["EdDSA"],
            audience=AUDIENCE,
            issuer=ISSUER,
            leeway=LEEWAY_S,
            options={"require": ["iss", "aud", "sub", "iat", "nbf", "exp", "jti"]},
        )
    except jwt.ExpiredSignatureError as exc:
        raise CredentialExpired("the agent credential has expired") from exc
    except jwt.InvalidTokenError as exc:
        raise CredentialInvalid(f"the agent credential does not verify: {exc}") from exc
    try:
        scopes = claims.get("scp")
        if not isinstance(scopes, list) or not all(isinstance(s, str) for s in scopes):
            raise CredentialInvalid("scp must be a list of scopes")
        return CredentialClaims(
            tenant_id=parse_id("ten", claims["ten"]),
            workspace_id=parse_id("ws", claims["ws"]),
            agent_id=parse_id("agt", claims["sub"]),
            token_id=parse_id("tok", claims["tok"]),
            key_id=parse_id("key", claims["key"]),
            scopes=frozenset(scopes),
            expires_at=int(claims["exp"]),
        )
    except (KeyError, InvalidId) as exc:
        raise CredentialInvalid("the credential's id claims are missing or malformed") from exc
