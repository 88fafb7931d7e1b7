"""The agent directory against the real gateway app and PostgreSQL (04-API-SPEC §2.2): what a
caller finds by capability, text and status, a page at a time; one agent and its card; and
that the directory's SQL shows an agent exactly what the send path lets it address."""

from __future__ import annotations

import itertools
import uuid
from typing import Any

import httpx
from agentbus.actions import workspaces
from agentbus.actions.context import Actor, Ctx
from agentbus.db import SCOPE
from agentbus.gateway.actions.addressing import Sender, visible
from agentbus.gateway.context import Gateway
from agentbus.gateway.store import agents
from agentbus.gateway.testkit import enroll, make_world
from agentbus.ids import format_id
from agentbus.store import plans
from agentbus.store.integration_tokens import verify_integration_token
from agentbus.store.users import insert_user
from platformkit.db.scope import tenant_transaction

Json = dict[str, Any]
REVIEW = [{"name": "code.review", "version": "1", "description": "Review a diff"}]
VISIBILITIES = ("private", "workspace", "tenant", "public")


async def _get(
    client: httpx.AsyncClient, path: str, headers: dict[str, str], **params: Any
) -> Json:
    reply = await client.get(path, params=params, headers=headers)
    assert reply.status_code == 200, reply.text
    return dict(reply.json())


async def test_agents_find_each_other_by_capability_and_text_a_page_at_a_time(
    gateway: Gateway, gateway_client: httpx.AsyncClient
) -> None:
    client, world = gateway_client, await make_world(gateway, "acme")
    alice = await enroll(client, world, "alice", description="Plans the work")
    bob = await enroll(client, world, "bob", capabilities=REVIEW, visibility="tenant")
    carol = await enroll(client, world, "carol", capabilities=REVIEW)
    me = alice.headers()

    found = await _get(client, "/v1/agents", me, capability="code.review")
    assert [a["id"] for a in found["items"]] == [bob.agent_id, carol.agent_id]
    assert found["items"][0]["agent_card"]["name"] == "bob"
    assert [a["id"] for a in (await _get(client, "/v1/agents", me, q="PLANS"))["items"]] == [
        alice.agent_id
    ]
    first = await _get(client, "/v1/agents", me, limit=2)
    rest = await _get(client, "/v1/agents", me, limit=2, cursor=first["next_cursor"])
    assert [a["id"] for a in first["items"] + rest["items"]] == [
        alice.agent_id, bob.agent_id, carol.agent_id,
    ]  # fmt: skip
    assert rest["next_cursor"] is None
    assert (await _get(client, "/v1/agents", me, status="disabled"))["items"] == []
    assert (await _get(client, "/v1/agents", me, workspace="nowhere"))["items"] == []
    by_id = await _get(client, "/v1/agents", me, workspace=format_id("ws", world.workspace_id))
    assert len(by_id["items"]) == 3

    agent = await _get(client, f"/v1/agents/{bob.agent_id}", me)
    assert (agent["address"], agent["capabilities"]) == (bob.address, REVIEW)
    card = await _get(client, f"/v1/agents/{bob.agent_id}/card", me)
    assert card["name"] == agent["agent_card"]["name"]
    assert [s["id"] for s in card["skills"]] == ["code.review"]
    assert card["supportedInterfaces"][0]["url"].endswith(f"/a2a/v1/agents/{bob.agent_id}")

    operator = {"Authorization": f"Bearer {world.token}"}
    assert len((await _get(client, "/v1/agents", operator))["items"]) == 3
    other = await make_world(gateway, "globex")
    outsider = {"Authorization": f"Bearer {other.token}"}
    assert (await _get(client, "/v1/agents", outsider))["items"] == []
    for path in (f"/v1/agents/{bob.agent_id}", f"/v1/agents/{bob.agent_id}/card", "/v1/agents/x"):
        reply = await client.get(path, headers=outsider)
        assert (reply.status_code, reply.json()["code"]) == (404, "AB-8002"), reply.text
    for params in ({"status": "lost"}, {"capability": "Not A Name"}, {"cursor": "nope"}):
        reply = await client.get("/v1/agents", params=params, headers=me)
        assert reply.status_code in (400, 422), (params, reply.text)


async def test_the_directory_shows_an_agent_exactly_whom_it_may_address(
    gateway: Gateway,
) -> None:
    """Every combination of visibility, workspace and owner, seen by each of the agents and by
    tokens: the directory's SQL agrees with ``addressing.visible``, the send path's rule."""
    world = await make_world(gateway, "acme")
    tid = world.tenant_id
    owner = (await verify_integration_token(gateway.pool, world.token)).owner_user_id
    as_owner = Ctx(gateway.pool, Actor.user(tid, owner))
    async with tenant_transaction(gateway.pool, SCOPE, tid) as conn:
        await plans.override_limits(conn, tid, {"workspaces": 2})
        other_user = await insert_user(
            conn, tid, idp="oidc:test", idp_subject="dana", email="dana@acme.example",
            display_name="Dana",
        )  # fmt: skip
    other_ws = await workspaces.create_workspace(as_owner, tid, slug="other", display_name="o")
    spaces, owners = (world.workspace_id, other_ws["id"]), (owner, other_user)
    made = []
    async with tenant_transaction(gateway.pool, SCOPE, tid) as conn:
        for n, (vis, ws, who) in enumerate(itertools.product(VISIBILITIES, spaces, owners)):
            made.append(await agents.insert_agent(conn, tid, _agent_values(n, vis, ws, who)))

    async def listed(viewer: agents.Viewer) -> set[uuid.UUID]:
        async with tenant_transaction(gateway.pool, SCOPE, tid) as conn:
            rows = await agents.list_agents(conn, tid, viewer, filters={}, after=None, limit=200)
        return {row["id"] for row in rows}

    for me in made:
        sender = Sender(tid, me["id"], me["workspace_id"], me["owner_user_id"])
        expected = {a["id"] for a in made if a["id"] == me["id"] or visible(a, sender)}
        viewer = agents.Viewer(me["workspace_id"], me["id"], me["owner_user_id"])
        assert await listed(viewer) == expected, (me["visibility"], me["name"])
    assert await listed(agents.Viewer(None)) == {a["id"] for a in made}
    in_other = {a["id"] for a in made if a["workspace_id"] == other_ws["id"]}
    assert await listed(agents.Viewer(other_ws["id"])) == in_other


def _agent_values(n: int, visibility: str, workspace_id: uuid.UUID, owner: uuid.UUID) -> Json:
    agent_id, name = uuid.uuid4(), f"agent-{n}"
    return {
        "id": agent_id, "workspace_id": workspace_id, "owner_user_id": owner, "name": name,
        "address": f"agent://acme/ws{n}/{name}", "display_name": None, "description": "",
        "capabilities": [], "agent_card": {}, "harness": "custom", "harness_version": None,
        "mode": "interactive", "visibility": visibility, "nats_consumer": f"agt_{agent_id.hex}",
        "inbox_subject": f"t.x.ws.y.agent.{agent_id.hex}.inbox", "delivery": {},
        "last_host": None,
    }  # fmt: skip
