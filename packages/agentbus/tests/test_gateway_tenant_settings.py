"""Tenant and workspace settings are bounded: deeper or bigger than their limit, or holding
what PostgreSQL cannot store, is AB-8001 and nothing is stored; a body nested past the parse
bound is AB-8001 too, never a 500; a tenant row that already holds settings past the bound
(written before it existed) still reads, its settings shown as ``{}`` with the reason."""

from __future__ import annotations

import json
from typing import Any

import httpx
import psycopg
import pytest
from agentbus.actions.validate import SETTINGS_MAX_DEPTH
from agentbus.gateway.context import Gateway
from agentbus.gateway.testkit import World, make_world
from psycopg.types.json import Jsonb

JSON = {"content-type": "application/json"}


def nested(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {}
    for _ in range(depth - 1):
        value = {"a": value}
    return value


async def tenant(gateway: Gateway) -> tuple[World, str, dict[str, str]]:
    world = await make_world(gateway, "acme")
    return (
        world,
        f"/v1/tenants/ten_{world.tenant_id.hex}",
        {"Authorization": f"Bearer {world.token}"},
    )


@pytest.mark.parametrize(
    "body",
    [
        json.dumps({"settings": nested(500)}),
        json.dumps({"settings": nested(SETTINGS_MAX_DEPTH + 1)}),
        '{"settings": {"name": "a\\u0000b"}}',
        '{"settings": {"name": "\\ud800"}}',
        json.dumps({"settings": {"n": 2**70}}),
        json.dumps({"settings": {"big": "x" * 70_000}}),
        "[" * 5000 + "]" * 5000,
        '{"display_name": "a\\u0000b"}',
    ],
    ids=[
        "depth-500",
        "depth-past-bound",
        "nul",
        "surrogate",
        "2**70",
        "oversize",
        "deep-body",
        "nul-name",
    ],
)
async def test_bad_settings_are_refused_and_nothing_is_stored(
    gateway: Gateway, gateway_client: httpx.AsyncClient, body: str
) -> None:
    _world, path, headers = await tenant(gateway)
    before = (await gateway_client.get(path, headers=headers)).json()

    reply = await gateway_client.patch(path, content=body, headers=headers | JSON)

    assert reply.status_code in (413, 422), reply.text
    assert reply.headers["content-type"].startswith("application/problem+json")
    after = await gateway_client.get(path, headers=headers)
    assert after.status_code == 200, after.text
    assert after.json()["settings"] == before["settings"]
    assert after.json()["display_name"] == before["display_name"]


async def test_settings_within_the_bound_are_kept(
    gateway: Gateway, gateway_client: httpx.AsyncClient
) -> None:
    _world, path, headers = await tenant(gateway)
    settings = nested(SETTINGS_MAX_DEPTH)
    reply = await gateway_client.patch(path, json={"settings": settings}, headers=headers)
    assert reply.status_code == 200, reply.text
    assert (await gateway_client.get(path, headers=headers)).json()["settings"] == settings


async def test_a_tenant_already_holding_deep_settings_still_reads(
    gateway: Gateway, gateway_client: httpx.AsyncClient, agentbus_db: str
) -> None:
    world, path, headers = await tenant(gateway)
    async with await psycopg.AsyncConnection.connect(agentbus_db, autocommit=True) as conn:
        await conn.execute(
            "UPDATE tenants SET settings = %s WHERE id = %s", (Jsonb(nested(500)), world.tenant_id)
        )

    reply = await gateway_client.get(path, headers=headers)

    assert reply.status_code == 200, reply.text
    assert reply.json()["settings"] == {}
    assert "PATCH settings" in reply.json()["settings_unreadable"]
    fixed = await gateway_client.patch(path, json={"settings": {"a": 1}}, headers=headers)
    assert fixed.status_code == 200, fixed.text
    assert "settings_unreadable" not in fixed.json()
