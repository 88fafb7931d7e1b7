"""Single sign-on against a real OIDC provider on loopback: the browser's round trip (PKCE,
state bound to the browser by a cookie), the user and membership made at the first login, oidc
teams synced from the groups claim at every login, and each way a login must fail."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any
from uuid import UUID

import httpx
import pytest
from asgi_lifespan import LifespanManager
from fastapi import FastAPI
from platformkit.passwords import FAST_TEST_POLICY
from platformkit.testing.oidc import OidcProvider
from pydantic import SecretStr
from strataplane.actions import members, teams
from strataplane.app import create_app
from strataplane.settings import Settings
from strataplane.testing import Seed, client_for

SECRET = "console client secret"


@pytest.fixture
def provider() -> Iterator[OidcProvider]:
    with OidcProvider("strataplane", SECRET) as running:
        running.person = {
            "sub": "idp|ada",
            "name": "Ada Lovelace",
            "email": "ada@example.com",
            "groups": ["sre-oncall", "everyone"],
        }
        yield running


@pytest.fixture
async def oidc_app(strataplane_database: str, provider: OidcProvider) -> AsyncIterator[FastAPI]:
    settings = Settings(
        database_url=SecretStr(strataplane_database),
        pool_size=6,
        shards=2,
        oidc_issuer=provider.issuer,
        oidc_client_id="strataplane",
        oidc_client_secret=SecretStr(SECRET),
        oidc_tenant="acme",
    )
    app = create_app(settings, password_policy=FAST_TEST_POLICY)
    async with LifespanManager(app):
        yield app


@dataclass
class World:
    admin_ctx: Any
    sre: UUID
    dba: UUID
    local: UUID


@pytest.fixture
async def world(oidc_app: FastAPI) -> World:
    seed = Seed(oidc_app.state.services)
    tenant, admin = await seed.tenant("acme")
    ctx = seed.ctx(admin, tenant.id)
    sre = await teams.create_team(ctx, "sre", "SRE", external_id="sre-oncall")
    dba = await teams.create_team(ctx, "dba", "DBA", external_id="dba")
    local = await teams.create_team(ctx, "reviewers", "Reviewers")
    return World(ctx, sre.id, dba.id, local.id)


async def sign_in(http: httpx.AsyncClient, next_path: str = "/fleet") -> httpx.Response:
    """The browser's round trip: us, the provider, us again."""
    start = await http.get("/api/v1/auth/oidc/login", params={"next": next_path})
    assert start.status_code == 303, start.text
    async with httpx.AsyncClient() as browser_at_provider:
        at_provider = await browser_at_provider.get(start.headers["location"])
    assert at_provider.status_code == 302
    back = at_provider.headers["location"]
    assert back.startswith("http://testserver/api/v1/auth/oidc/callback?")
    return await http.get(back)


async def team_members(app: FastAPI, world: World, team: UUID) -> set[str]:
    found = await teams.list_team_members(world.admin_ctx, team)
    return {m.display_name for m in found}


async def test_first_login_creates_the_member_and_syncs_teams(
    oidc_app: FastAPI, world: World, provider: OidcProvider
) -> None:
    async with client_for(oidc_app) as http:
        done = await sign_in(http)
        assert done.status_code == 303
        assert done.headers["location"] == "/fleet"
        assert "sp_oidc" not in http.cookies  # cleared once used
        me = (await http.get("/api/v1/auth/me")).json()
    assert me["display_name"] == "Ada Lovelace"
    assert me["tenant_id"] is not None
    sent = provider.authorize_requests[-1]
    assert sent["code_challenge_method"] == "S256"
    assert sent["redirect_uri"] == "http://testserver/api/v1/auth/oidc/callback"
    assert await team_members(oidc_app, world, world.sre) == {"Ada Lovelace"}
    assert await team_members(oidc_app, world, world.dba) == set()
    member = await members.access_member(world.admin_ctx, UUID(me["user_id"]))
    assert member.source == "oidc"

    # the groups changed at the provider: the next login moves the teams with them
    await teams.add_team_member(world.admin_ctx, world.local, UUID(me["user_id"]))
    provider.person = {**(provider.person or {}), "groups": ["dba"]}
    async with client_for(oidc_app) as http:
        assert (await sign_in(http)).status_code == 303
        again = (await http.get("/api/v1/auth/me")).json()
    assert again["user_id"] == me["user_id"]  # the same user: same issuer and subject
    assert await team_members(oidc_app, world, world.sre) == set()
    assert await team_members(oidc_app, world, world.dba) == {"Ada Lovelace"}
    assert await team_members(oidc_app, world, world.local) == {"Ada Lovelace"}  # hand-made


async def test_a_callback_needs_the_browser_that_started_it(
    oidc_app: FastAPI, world: World
) -> None:
    async with client_for(oidc_app) as http:
        start = await http.get("/api/v1/auth/oidc/login")
        async with httpx.AsyncClient() as elsewhere:
            back = (await elsewhere.get(start.headers["location"])).headers["location"]
    async with client_for(oidc_app) as other_browser:  # no sp_oidc cookie
        refused = await other_browser.get(back)
        assert refused.status_code == 401
        assert refused.json()["code"] == "auth.oidc_failed"
        assert "sp_session" not in other_browser.cookies


async def test_a_state_is_good_once(oidc_app: FastAPI, world: World) -> None:
    async with client_for(oidc_app) as http:
        start = await http.get("/api/v1/auth/oidc/login")
        async with httpx.AsyncClient() as at_provider:
            back = (await at_provider.get(start.headers["location"])).headers["location"]
        assert (await http.get(back)).status_code == 303
        replay = await http.get(back)
    assert replay.status_code == 401


@pytest.mark.parametrize(
    "tamper",
    [{"overrides": {"aud": "someone-else"}}, {"overrides": {"nonce": "x"}},
     {"sign_with_other_key": True}, {"person": None}],
)  # fmt: skip
async def test_a_refused_id_token_opens_no_session(
    oidc_app: FastAPI, world: World, provider: OidcProvider, tamper: dict[str, Any]
) -> None:
    for name, value in tamper.items():
        setattr(provider, name, value)
    async with client_for(oidc_app) as http:
        answer = await sign_in(http)
        assert answer.status_code == 401
        assert answer.json()["code"] == "auth.oidc_failed"
        assert "sp_session" not in http.cookies
        body = answer.text
    assert "nonce" not in body
    assert "aud" not in body  # the reason goes to the log, not the browser


async def test_a_disabled_membership_refuses_the_login(
    oidc_app: FastAPI, world: World, provider: OidcProvider
) -> None:
    async with client_for(oidc_app) as http:
        assert (await sign_in(http)).status_code == 303
        user_id = UUID((await http.get("/api/v1/auth/me")).json()["user_id"])
    await members.set_member_disabled(world.admin_ctx, user_id, True)
    async with client_for(oidc_app) as http:
        refused = await sign_in(http)
    assert refused.status_code == 403


async def test_without_a_provider_the_routes_answer_404(sp_app: FastAPI) -> None:
    async with client_for(sp_app) as http:
        for path in ("/api/v1/auth/oidc/login", "/api/v1/auth/oidc/callback?code=a&state=b"):
            answer = await http.get(path)
            assert answer.status_code == 404
            assert answer.json()["code"] == "oidc.not_configured"
