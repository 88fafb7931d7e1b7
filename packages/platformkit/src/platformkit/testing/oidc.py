"""A small OpenID Connect provider for tests, a real HTTP server on loopback: discovery, a key
set, the authorization endpoint (authorization code with PKCE S256) and the token endpoint,
whose ID tokens are signed RS256.

Nobody types a password: the person "signed in" at the provider is whatever the test puts in
``provider.person`` (the claims of the next ID token: ``sub``, ``email``, ``groups``...);
``None`` makes the authorization endpoint answer ``error=access_denied``. ``overrides`` is
merged into the next ID tokens' claims (a wrong ``aud`` or ``nonce``), and ``sign_with_other_key``
signs them with a key the key set does not hold, for the checks a client must make.

    with OidcProvider("console", "s3cret") as provider:
        provider.person = {"sub": "u-1", "email": "ada@example.com", "groups": ["sre"]}
        ... point the system at provider.issuer ...
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import threading
import time
from dataclasses import dataclass, field
from functools import cache
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlencode, urlsplit

from joserfc import jwt
from joserfc.jwk import KeySet, RSAKey

__all__ = ["OidcProvider"]


@dataclass
class _Grant:
    client_id: str
    redirect_uri: str
    challenge: str
    nonce: str | None
    claims: dict[str, Any]


def _s256(verifier: str) -> str:
    digest = hashlib.sha256(verifier.encode()).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


@cache
def _key(kid: str, which: str) -> RSAKey:
    """Made once per test process: RSA generation is slow, and tests need no fresh keys."""
    return RSAKey.generate_key(2048, parameters={"kid": kid, "use": "sig", "alg": "RS256"})


@dataclass
class OidcProvider:
    client_id: str
    client_secret: str
    host: str = "127.0.0.1"
    person: dict[str, Any] | None = None
    overrides: dict[str, Any] = field(default_factory=dict)
    sign_with_other_key: bool = False
    authorize_requests: list[dict[str, str]] = field(default_factory=list)
    token_requests: int = 0

    def __post_init__(self) -> None:
        self._key = _key("test-key-1", "provider")
        self._other = _key("test-key-1", "forger")  # same key id, other key
        self._grants: dict[str, _Grant] = {}
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None

    @property
    def issuer(self) -> str:
        if self._server is None:
            raise RuntimeError("the provider is not started")
        return f"http://{self.host}:{self._server.server_port}"

    def __enter__(self) -> OidcProvider:
        provider = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:  # quiet
                return

            def do_GET(self) -> None:
                provider._get(self)

            def do_POST(self) -> None:
                provider._post(self)

        self._server = ThreadingHTTPServer((self.host, 0), Handler)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    # -- answers ---------------------------------------------------------------------------

    @staticmethod
    def _send(
        handler: BaseHTTPRequestHandler,
        status: int,
        body: dict[str, Any] | None = None,
        location: str | None = None,
    ) -> None:
        data = json.dumps(body or {}).encode()
        handler.send_response(status)
        if location is not None:
            handler.send_header("Location", location)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(data)))
        handler.send_header("Cache-Control", "no-store")
        handler.end_headers()
        handler.wfile.write(data)

    def _get(self, handler: BaseHTTPRequestHandler) -> None:
        url = urlsplit(handler.path)
        if url.path == "/.well-known/openid-configuration":
            self._send(handler, 200, self.discovery())
        elif url.path == "/jwks":
            self._send(handler, 200, dict(KeySet([self._key]).as_dict(private=False)))
        elif url.path == "/authorize":
            query = {k: v[-1] for k, v in parse_qs(url.query).items()}
            self._authorize(handler, query)
        else:
            self._send(handler, 404, {"error": "not_found"})

    def discovery(self) -> dict[str, Any]:
        return {
            "issuer": self.issuer,
            "authorization_endpoint": self.issuer + "/authorize",
            "token_endpoint": self.issuer + "/token",
            "jwks_uri": self.issuer + "/jwks",
            "response_types_supported": ["code"],
            "subject_types_supported": ["public"],
            "id_token_signing_alg_values_supported": ["RS256"],
            "code_challenge_methods_supported": ["S256"],
            "scopes_supported": ["openid", "email", "profile", "groups"],
            "token_endpoint_auth_methods_supported": ["client_secret_basic"],
        }

    def _authorize(self, handler: BaseHTTPRequestHandler, query: dict[str, str]) -> None:
        with self._lock:
            self.authorize_requests.append(query)
        redirect = query.get("redirect_uri", "")
        if (
            query.get("client_id") != self.client_id
            or not redirect
            or query.get("response_type") != "code"
            or "openid" not in query.get("scope", "").split()
            or query.get("code_challenge_method") != "S256"
            or not query.get("code_challenge")
        ):
            self._send(handler, 400, {"error": "invalid_request"})
            return
        back = {"state": query.get("state", "")}
        if self.person is None:
            back["error"] = "access_denied"
        else:
            code = secrets.token_urlsafe(24)
            grant = _Grant(
                self.client_id,
                redirect,
                query["code_challenge"],
                query.get("nonce"),
                dict(self.person),
            )
            with self._lock:
                self._grants[code] = grant
            back["code"] = code
        self._send(handler, 302, location=f"{redirect}?{urlencode(back)}")

    def _post(self, handler: BaseHTTPRequestHandler) -> None:
        if urlsplit(handler.path).path != "/token":
            self._send(handler, 404, {"error": "not_found"})
            return
        with self._lock:
            self.token_requests += 1
        length = int(handler.headers.get("Content-Length") or 0)
        form = {k: v[-1] for k, v in parse_qs(handler.rfile.read(length).decode()).items()}
        if not self._client_ok(handler.headers.get("Authorization", "")):
            self._send(handler, 401, {"error": "invalid_client"})
            return
        with self._lock:
            grant = self._grants.pop(form.get("code", ""), None)  # a code is good once
        if (
            form.get("grant_type") != "authorization_code"
            or grant is None
            or grant.redirect_uri != form.get("redirect_uri")
            or not hmac.compare_digest(_s256(form.get("code_verifier", "")), grant.challenge)
        ):
            self._send(handler, 400, {"error": "invalid_grant"})
            return
        now = int(time.time())
        claims = {
            "iss": self.issuer,
            "aud": self.client_id,
            "iat": now,
            "exp": now + 300,
            **({"nonce": grant.nonce} if grant.nonce else {}),
            **grant.claims,
            **self.overrides,
        }
        key = self._other if self.sign_with_other_key else self._key
        id_token = jwt.encode({"alg": "RS256", "kid": key.kid}, claims, key)
        body = {"access_token": secrets.token_urlsafe(16), "token_type": "Bearer"}
        self._send(handler, 200, {**body, "expires_in": 300, "id_token": id_token})

    def _client_ok(self, authorization: str) -> bool:
        scheme, _, encoded = authorization.partition(" ")
        if scheme.lower() != "basic":
            return False
        try:
            user, _, password = base64.b64decode(encoded).decode().partition(":")
        except ValueError:
            return False
        given = f"{unquote(user)}:{unquote(password)}".encode()
        return hmac.compare_digest(given, f"{self.client_id}:{self.client_secret}".encode())
