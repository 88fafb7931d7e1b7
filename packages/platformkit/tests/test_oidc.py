"""The OIDC client against a real provider on loopback: PKCE and nonce on the way out, every
ID token check on the way back (signature, issuer, audience, nonce), a code good once."""

from __future__ import annotations

from collections.abc import Iterator
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from platformkit.oidc import OidcClient, OidcError, Pending, new_pending
from platformkit.testing.oidc import OidcProvider

REDIRECT = "http://127.0.0.1:9/callback"  # never reached: the test reads the redirect


@pytest.fixture
def provider() -> Iterator[OidcProvider]:
    with OidcProvider("console", "a client secret/with+odd=chars") as running:
        running.person = {"sub": "u-1", "email": "ada@example.com", "groups": ["sre", "dba"]}
        yield running


def client(provider: OidcProvider) -> OidcClient:
    return OidcClient(provider.issuer, "console", provider.client_secret)


async def code_for(oidc: OidcClient, pending: Pending) -> tuple[str, dict[str, str]]:
    url = await oidc.authorization_url(REDIRECT, pending)
    async with httpx.AsyncClient() as http:
        answer = await http.get(url)
    assert answer.status_code == 302
    back = {k: v[-1] for k, v in parse_qs(urlsplit(answer.headers["location"]).query).items()}
    return back.get("code", ""), back


async def test_the_whole_flow_gives_the_providers_claims(provider: OidcProvider) -> None:
    oidc, pending = client(provider), new_pending()
    code, back = await code_for(oidc, pending)
    assert back["state"] == pending.state
    sent = provider.authorize_requests[-1]
    assert sent["code_challenge_method"] == "S256"
    assert sent["nonce"] == pending.nonce
    assert pending.code_verifier not in str(sent)  # only its digest leaves
    claims = await oidc.claims(code, REDIRECT, pending)
    assert claims["sub"] == "u-1"
    assert claims["groups"] == ["sre", "dba"]
    with pytest.raises(OidcError, match="refused the code"):
        await oidc.claims(code, REDIRECT, pending)  # a code is good once


async def test_a_wrong_verifier_is_refused_by_the_provider(provider: OidcProvider) -> None:
    oidc, pending = client(provider), new_pending()
    code, _ = await code_for(oidc, pending)
    other = Pending(pending.state, pending.nonce, new_pending().code_verifier)
    with pytest.raises(OidcError, match="refused the code"):
        await oidc.claims(code, REDIRECT, other)


@pytest.mark.parametrize(
    ("override", "reason"),
    [
        ({"aud": "another-client"}, "another client"),
        ({"nonce": "replayed"}, "claims"),
        ({"iss": "http://127.0.0.1:1"}, "claims"),
        ({"exp": 1_000_000}, "claims"),
    ],
)
async def test_id_token_claims_are_checked(
    provider: OidcProvider, override: dict[str, object], reason: str
) -> None:
    provider.overrides = override
    oidc, pending = client(provider), new_pending()
    code, _ = await code_for(oidc, pending)
    with pytest.raises(OidcError, match=reason):
        await oidc.claims(code, REDIRECT, pending)


async def test_a_token_signed_by_another_key_is_refused(provider: OidcProvider) -> None:
    provider.sign_with_other_key = True
    oidc, pending = client(provider), new_pending()
    code, _ = await code_for(oidc, pending)
    with pytest.raises(OidcError, match="signature"):
        await oidc.claims(code, REDIRECT, pending)


async def test_a_wrong_client_secret_is_refused(provider: OidcProvider) -> None:
    oidc, pending = OidcClient(provider.issuer, "console", "wrong"), new_pending()
    code, _ = await code_for(oidc, pending)
    with pytest.raises(OidcError, match="refused the code"):
        await oidc.claims(code, REDIRECT, pending)


def test_only_https_or_loopback_providers() -> None:
    with pytest.raises(OidcError):
        OidcClient("http://idp.example", "c", "s")
    assert OidcClient("https://idp.example/", "c", "s").issuer == "https://idp.example"
