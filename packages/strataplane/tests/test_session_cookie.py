"""The session cookie is Secure whenever strataplane is reached over TLS: an https request, a
trusted proxy (the PROXY-protocol front) saying X-Forwarded-Proto https, or an https public URL."""

from __future__ import annotations

from fastapi import FastAPI
from strataplane.agents.settings import FleetSettings
from strataplane.testing import PASSWORD, Seed, client_for


async def test_the_session_cookie_is_secure_exactly_behind_tls(
    sp_app: FastAPI, sp_app_seed: Seed
) -> None:
    await sp_app_seed.user("root", platform_admin=True)
    body = {"username": "root", "password": PASSWORD, "platform": True}
    claim = {"X-Forwarded-Proto": "https"}

    async def cookie(**headers: str) -> str:
        async with client_for(sp_app) as http:  # the ASGI client's address is 127.0.0.1
            login = await http.post("/api/v1/auth/login", json=body, headers=headers)
            assert login.status_code == 200, login.text
            return login.headers["set-cookie"]

    assert "Secure" not in await cookie()
    assert "Secure" not in await cookie(**claim)  # from anyone, the header means nothing
    sp_app.state.fleet_settings = FleetSettings(proxy_from=["127.0.0.0/8"])
    assert "Secure" in await cookie(**claim)
    assert "Secure" not in await cookie()
    sp_app.state.fleet_settings = FleetSettings(proxy_from=[])
    sp_app_seed.services.settings.public_url = "https://strataplane.example"
    assert "Secure" in await cookie()
