"""Sign-in through an OpenID Connect provider: the authorization code flow with PKCE (S256) and
a nonce, the ID token checked against the provider's published keys.

authlib builds the authorization URL and exchanges the code; joserfc checks the ID token's
signature (RS256 or ES256, never ``none`` nor a shared secret), issuer, audience, expiry and
nonce. Discovery and keys are fetched once and kept; an ID token signed by a key id not yet
seen fetches the keys once more (the provider rotated them).

A system keeps the :class:`Pending` values of a login between the redirect and the callback
(the state in a cookie, the rest server-side), then::

    client = OidcClient(issuer, client_id, client_secret)
    url = await client.authorization_url(redirect_uri, pending)   # send the browser there
    claims = await client.claims(code, redirect_uri, pending)     # on the callback

Failures raise :class:`OidcError` with a short reason fit for a log, never for the browser.
"""

from __future__ import annotations

import ipaddress
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpx
from authlib.integrations.httpx_client import AsyncOAuth2Client  # type: ignore[import-untyped]  # authlib ships no types
from joserfc import jwt
from joserfc.errors import JoseError
from joserfc.jwk import KeySet

__all__ = ["ALGORITHMS", "OidcClient", "OidcError", "Pending", "new_pending"]

ALGORITHMS = ("RS256", "ES256")
DEFAULT_SCOPES = ("openid", "email", "profile")
# How far the ID token's clocks may disagree with ours.
LEEWAY = 60


class OidcError(Exception):
    """The provider could not be used or its answer was not acceptable."""


@dataclass(frozen=True)
class Pending:
    """One login between redirect and callback: ``state`` travels with the browser (and in a
    cookie bound to it), ``nonce`` comes back inside the ID token, ``code_verifier`` proves to
    the token endpoint that the code's redeemer started the login."""

    state: str
    nonce: str
    code_verifier: str


def new_pending() -> Pending:
    return Pending(secrets.token_urlsafe(32), secrets.token_urlsafe(32), secrets.token_urlsafe(48))


@dataclass(frozen=True)
class Endpoints:
    authorization: str
    token: str
    jwks: str


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_url(url: str, what: str) -> str:
    """https, or plain http to a loopback address only (a provider on this machine)."""
    parts = urlsplit(url)
    if parts.scheme == "https" or (parts.scheme == "http" and _loopback(parts.hostname or "")):
        return url
    raise OidcError(f"the provider's {what} must be an https URL")


class OidcClient:
    def __init__(
        self,
        issuer: str,
        client_id: str,
        client_secret: str | None,
        *,
        scopes: Sequence[str] = DEFAULT_SCOPES,
        timeout: float = 10.0,
    ) -> None:
        self.issuer = check_url(issuer.rstrip("/"), "issuer")
        self.client_id = client_id
        self.client_secret = client_secret
        self.scopes = " ".join(scopes)
        self.timeout = timeout
        self._endpoints: Endpoints | None = None
        self._keys: KeySet | None = None

    def _client(self, redirect_uri: str) -> AsyncOAuth2Client:
        return AsyncOAuth2Client(
            self.client_id,
            self.client_secret,
            scope=self.scopes,
            redirect_uri=redirect_uri,
            code_challenge_method="S256",
            token_endpoint_auth_method="client_secret_basic" if self.client_secret else "none",
            timeout=self.timeout,
        )

    async def _get_json(self, url: str) -> dict[str, Any]:
        try:
            async with httpx.AsyncClient(timeout=self.timeout) as http:
                answer = await http.get(url, headers={"Accept": "application/json"})
                answer.raise_for_status()
                found = answer.json()
        except (httpx.HTTPError, ValueError) as exc:
            raise OidcError(f"fetching {url}: {type(exc).__name__}") from None
        if not isinstance(found, dict):
            raise OidcError(f"{url} did not answer a JSON object")
        return found

    async def endpoints(self) -> Endpoints:
        """The provider's discovery document, checked to name this issuer."""
        if self._endpoints is None:
            doc = await self._get_json(self.issuer + "/.well-known/openid-configuration")
            if str(doc.get("issuer", "")).rstrip("/") != self.issuer:
                raise OidcError("the discovery document names another issuer")
            try:
                self._endpoints = Endpoints(
                    check_url(str(doc["authorization_endpoint"]), "authorization endpoint"),
                    check_url(str(doc["token_endpoint"]), "token endpoint"),
                    check_url(str(doc["jwks_uri"]), "key set URL"),
                )
            except KeyError as exc:
                raise OidcError(f"the discovery document lacks {exc.args[0]}") from None
        return self._endpoints

    async def _key_set(self, *, refresh: bool) -> KeySet:
        if self._keys is None or refresh:
            found = await self._get_json((await self.endpoints()).jwks)
            try:
                # a JSON object, checked by joserfc; its parameter is typed as a TypedDict
                self._keys = KeySet.import_key_set(found)  # type: ignore[arg-type]
            except (JoseError, ValueError, TypeError, KeyError):
                raise OidcError("the provider's key set is not valid") from None
        return self._keys

    async def authorization_url(self, redirect_uri: str, pending: Pending) -> str:
        endpoint = (await self.endpoints()).authorization
        async with self._client(redirect_uri) as client:
            url, _ = client.create_authorization_url(
                endpoint,
                state=pending.state,
                nonce=pending.nonce,
                code_verifier=pending.code_verifier,
            )
        return str(url)

    async def claims(self, code: str, redirect_uri: str, pending: Pending) -> dict[str, Any]:
        """Redeem ``code`` and return the ID token's claims once every check has passed."""
        endpoints = await self.endpoints()
        async with self._client(redirect_uri) as client:
            try:
                token = await client.fetch_token(
                    endpoints.token, code=code, code_verifier=pending.code_verifier
                )
            except Exception as exc:  # authlib raises its own tree and httpx's
                raise OidcError(
                    f"the token endpoint refused the code: {type(exc).__name__}"
                ) from None
        id_token = token.get("id_token")
        if not isinstance(id_token, str):
            raise OidcError("the token response has no ID token")
        return await self.verify(id_token, pending.nonce)

    async def verify(self, id_token: str, nonce: str) -> dict[str, Any]:
        keys = await self._key_set(refresh=False)
        try:
            decoded = self._decode(id_token, keys)
        except JoseError:
            # A key id we do not hold may be a rotation: fetch the keys once more.
            try:
                decoded = self._decode(id_token, await self._key_set(refresh=True))
            except JoseError:
                raise OidcError("the ID token's signature does not verify") from None
        claims: dict[str, Any] = dict(decoded.claims)
        registry = jwt.JWTClaimsRegistry(
            leeway=LEEWAY,
            iss={"essential": True, "value": self.issuer},
            sub={"essential": True},
            exp={"essential": True},
            iat={"essential": True},
            nonce={"essential": True, "value": nonce},
        )
        try:
            registry.validate(claims)
        except JoseError as exc:
            raise OidcError(f"the ID token's claims are not acceptable: {exc.error}") from None
        audience = claims.get("aud")
        audiences = audience if isinstance(audience, list) else [audience]
        if self.client_id not in audiences:
            raise OidcError("the ID token is for another client")
        if len(audiences) > 1 and claims.get("azp") != self.client_id:
            raise OidcError("the ID token was issued to another party")
        if not isinstance(claims["sub"], str) or not claims["sub"]:
            raise OidcError("the ID token has no subject")
        return claims

    def _decode(self, id_token: str, keys: KeySet) -> jwt.Token:
        try:
            return jwt.decode(id_token, keys, algorithms=list(ALGORITHMS))
        except JoseError:
            raise
        except (ValueError, TypeError, KeyError):
            raise OidcError("the ID token is malformed") from None
