"""The kernel's request guard on the gateway, in AgentBus's own problem format: JSON nested
5,000 or 100,000 deep is AB-8001 (never a 500), a 500-deep ``settings`` PATCH is refused and
not committed, a body past 1 MiB is AB-5002 before it is read or as it streams in, unstorable
text in a query or path is AB-8001 naming the parameter; a batch takes its 4 MiB and a blob
its plan's limit."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from agentbus.gateway.context import Gateway
from agentbus.gateway.testkit import World, make_world
from platformkit.http import DEFAULT_BODY_LIMIT

JSON = {"content-type": "application/json"}


def nested(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {}
    for _ in range(depth - 1):
        value = {"a": value}
    return value


@pytest.fixture
async def world(gateway: Gateway) -> World:
    return await make_world(gateway, "acme")


def auth(world: World) -> dict[str, str]:
    return {"Authorization": f"Bearer {world.token}"}


def assert_ab(reply: httpx.Response, status: int, code: str) -> dict[str, Any]:
    assert reply.status_code == status, reply.text
    assert reply.headers["content-type"].startswith("application/problem+json")
    problem: dict[str, Any] = reply.json()
    assert problem["code"] == code
    assert problem["type"] == f"https://agentbus.exchange/errors/{code}"
    assert problem["name"]
    return problem


@pytest.mark.parametrize("depth", [5000, 100_000])
async def test_deep_json_is_ab_8001_on_every_json_route(
    gateway_client: httpx.AsyncClient, world: World, depth: int
) -> None:
    deep = "[" * depth + "]" * depth
    tenant = f"/v1/tenants/ten_{world.tenant_id.hex}"
    routes = [("PATCH", tenant), ("POST", "/v1/workspaces"), ("POST", "/v1/inbox/ack"),
              ("POST", "/v1/agents/x/heartbeat")]  # fmt: skip
    for method, path in routes:
        reply = await gateway_client.request(method, path, content=deep, headers=auth(world) | JSON)
        assert_ab(reply, 422, "AB-8001")
    # sends parse their envelopes themselves: still a 4xx, in their own terms
    reply = await gateway_client.post("/v1/messages", content=deep, headers=auth(world) | JSON)
    assert 400 <= reply.status_code < 500, reply.text


async def test_deep_settings_are_refused_and_not_committed(
    gateway_client: httpx.AsyncClient, world: World
) -> None:
    path = f"/v1/tenants/ten_{world.tenant_id.hex}"
    before = (await gateway_client.get(path, headers=auth(world))).json()
    body = json.dumps({"settings": nested(500)})
    problem = assert_ab(
        await gateway_client.patch(path, content=body, headers=auth(world) | JSON), 422, "AB-8001"
    )
    assert problem["errors"][0]["field"] == "body"
    assert "nested deeper than" in problem["errors"][0]["reason"]
    after = await gateway_client.get(path, headers=auth(world))
    assert after.status_code == 200
    assert after.json()["settings"] == before["settings"]


async def test_unstorable_json_names_the_field(
    gateway_client: httpx.AsyncClient, world: World
) -> None:
    path = f"/v1/tenants/ten_{world.tenant_id.hex}"
    body = '{"settings": {"labels": ["ok", "a\\u0000b"]}}'
    reply = await gateway_client.patch(path, content=body, headers=auth(world) | JSON)
    problem = assert_ab(reply, 422, "AB-8001")
    assert problem["field"] == "settings.labels.1"


async def test_bodies_past_the_limit_are_ab_5002(
    gateway_client: httpx.AsyncClient, world: World
) -> None:
    path = f"/v1/tenants/ten_{world.tenant_id.hex}"
    over = b" " * (DEFAULT_BODY_LIMIT + 1)
    problem = assert_ab(
        await gateway_client.patch(path, content=over, headers=auth(world) | JSON), 413, "AB-5002"
    )
    assert problem["limit"] == DEFAULT_BODY_LIMIT

    async def chunks() -> Any:
        for _ in range(40):
            yield b" " * 65536

    reply = await gateway_client.post("/v1/inbox/ack", content=chunks(), headers=auth(world) | JSON)
    assert_ab(reply, 413, "AB-5002")


async def test_batches_and_blobs_keep_their_own_limits(
    gateway_client: httpx.AsyncClient, world: World
) -> None:
    two_mib = b" " * (2 << 20)
    reply = await gateway_client.post(
        "/v1/messages/batch", content=two_mib, headers=auth(world) | JSON
    )
    assert reply.json()["code"] != "AB-5002", reply.text  # past the guard: the route answers
    reply = await gateway_client.post(
        "/v1/blobs", content=two_mib, headers=auth(world) | {"content-type": "text/plain"}
    )
    assert reply.json()["code"] != "AB-5002", reply.text


async def test_bad_text_in_a_query_or_path_names_the_parameter(
    gateway_client: httpx.AsyncClient, world: World
) -> None:
    for query in ("capability=%00", "capability=%ed%a0%80", "capability=%ff"):
        reply = await gateway_client.get(f"/v1/tasks?{query}", headers=auth(world))
        problem = assert_ab(reply, 422, "AB-8001")
        assert problem["field"] == "capability"
    reply = await gateway_client.get("/v1/workspaces/ws%00x", headers=auth(world))
    assert assert_ab(reply, 422, "AB-8001")["field"] == "workspace_id"


async def test_nul_in_a_multipart_field_is_ab_8001_naming_it(
    gateway_client: httpx.AsyncClient, world: World
) -> None:
    """AgentBus has no HTML forms; its API refuses a multipart body with NUL in a field (and
    an upload) before a route reads it, never a 500."""
    for files in ({"name": (None, "a\x00b")}, {"name": ("x.txt", b"x", "text/plain")}):
        reply = await gateway_client.post("/v1/workspaces", files=files, headers=auth(world))
        problem = assert_ab(reply, 422, "AB-8001")
        assert "name" in json.dumps(problem)
