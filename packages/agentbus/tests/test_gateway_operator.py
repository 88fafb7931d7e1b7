"""The platform operator over the API (04-API-SPEC §1.2, §10.1) against the real gateway app
and PostgreSQL: creating and listing tenants takes AGENTBUS_PLATFORM_TOKEN, nothing else; the
bootstrap token it answers once works at once."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from agentbus.db import SCOPE
from agentbus.gateway.app import create_app
from agentbus.gateway.config import GatewaySettings
from agentbus.gateway.context import Gateway
from agentbus.ids import parse_id
from agentbus.store.audit_actions import list_audit_actions
from asgi_lifespan import LifespanManager
from platformkit.db.scope import tenant_transaction
from pydantic import SecretStr

OPERATOR = "platform-operator-token-of-this-test-0123456789"
Json = dict[str, Any]
OWNER = {"email": "ops@initech.example", "idp": "oidc:test", "idp_subject": "ops"}
NEW = {"slug": "initech", "display_name": "Initech", "plan": "business", "owner": OWNER}


@pytest.fixture
async def operated(
    gateway_settings: GatewaySettings,
) -> AsyncIterator[tuple[Any, httpx.AsyncClient]]:
    settings = gateway_settings.model_copy(update={"platform_token": SecretStr(OPERATOR)})
    app = create_app(settings)
    async with LifespanManager(app, startup_timeout=30, shutdown_timeout=30):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://gateway.test") as c:
            yield app.state.gateway, c


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def test_the_operator_creates_and_lists_tenants(
    operated: tuple[Gateway, httpx.AsyncClient],
) -> None:
    gateway, client = operated
    reply = await client.post("/v1/tenants", json=NEW, headers=bearer(OPERATOR))
    assert reply.status_code == 201, reply.text
    assert reply.headers["cache-control"] == "no-store"
    created = reply.json()
    tenant, token = created["tenant"], created["bootstrap_token"]["token"]
    assert (tenant["slug"], tenant["plan"], tenant["retention_days"]) == ("initech", "business", 90)
    own = await client.get(f"/v1/tenants/{tenant['id']}", headers=bearer(token))
    assert (own.status_code, own.json()["id"]) == (200, tenant["id"]), own.text

    listed = await client.get("/v1/tenants", headers=bearer(OPERATOR))
    assert tenant["id"] in [t["id"] for t in listed.json()["items"]], listed.text
    again = await client.post("/v1/tenants", json=NEW, headers=bearer(OPERATOR))
    assert (again.status_code, again.json()["code"]) == (409, "AB-8003")
    async with tenant_transaction(gateway.pool, SCOPE, parse_id("ten", tenant["id"])) as conn:
        actions = await list_audit_actions(
            conn, parse_id("ten", tenant["id"]), action="tenant.create"
        )
    assert [(a["actor_type"], a["actor_id"]) for a in actions] == [("platform", "api:operator")]

    for wrong in (OPERATOR + "x", token, OPERATOR[:-1]):
        for method in ("GET", "POST"):
            refused = await client.request(method, "/v1/tenants", json=NEW, headers=bearer(wrong))
            assert (refused.status_code, refused.json()["code"]) == (401, "AB-1002")


async def test_without_a_configured_token_nobody_is_the_operator(
    gateway_client: httpx.AsyncClient,
) -> None:
    for token in ("", OPERATOR):
        refused = await gateway_client.get("/v1/tenants", headers=bearer(token or "x"))
        assert (refused.status_code, refused.json()["code"]) == (401, "AB-1002")
