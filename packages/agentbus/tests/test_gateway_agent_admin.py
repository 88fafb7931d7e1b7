"""Changing, disabling and deleting agents against the real gateway app, PostgreSQL and NATS
(04-API-SPEC §2.3): what an agent may change about itself and what only its owner may; a
disabled agent neither sends nor receives until it is enabled again; a deleted agent's waiting
messages are discarded, its open task requests failed and its consumer removed; the card
follows; the audit rows."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest
from agentbus.broker import stream_name
from agentbus.db import SCOPE
from agentbus.gateway.context import Gateway
from agentbus.gateway.store.directory import DIRECTORY_TTL_S
from agentbus.gateway.testkit import (
    SimAgent,
    World,
    enroll,
    make_world,
    owner_token,
    post_envelope,
    post_signed,
)
from agentbus.store.audit_actions import list_audit_actions
from nats.js.errors import NotFoundError
from platformkit.db.scope import tenant_transaction

Json = dict[str, Any]
REVIEW = [{"name": "code.review", "version": "1", "description": "Review a diff"}]


async def _patch(
    client: httpx.AsyncClient, agent: SimAgent, headers: dict[str, str], body: Json, status: int
) -> Json:
    reply = await client.patch(f"/v1/agents/{agent.agent_id}", json=body, headers=headers)
    assert reply.status_code == status, reply.text
    return dict(reply.json())


def _owner(world: World) -> dict[str, str]:
    return {"Authorization": f"Bearer {world.token}"}


async def test_an_agent_changes_what_it_says_about_itself_and_nothing_else(
    gateway: Gateway, gateway_client: httpx.AsyncClient
) -> None:
    client, world = gateway_client, await make_world(gateway, "acme")
    alice, bob = await enroll(client, world, "alice"), await enroll(client, world, "bob")
    body = {"capabilities": REVIEW, "agent_card": {"provider": {"organization": "Acme"}}}
    changed = await _patch(client, alice, alice.headers(), body, 200)
    assert changed["capabilities"] == REVIEW
    assert [s["id"] for s in changed["agent_card"]["skills"]] == ["code.review"]
    changed = await _patch(client, alice, alice.headers(), {"description": "Reviews"}, 200)
    card = changed["agent_card"]
    assert (card["description"], card["provider"]) == ("Reviews", {"organization": "Acme"})

    for body, status, code in (
        ({"visibility": "tenant"}, 403, "AB-1008"),  # only the owner may
        ({"agent_card": {"name": "someone else"}}, 422, "AB-8001"),  # a generated member
        ({}, 422, "AB-8001"),
        ({"status": "deleted"}, 422, "AB-8001"),
    ):
        reply = await client.patch(
            f"/v1/agents/{alice.agent_id}", json=body, headers=alice.headers()
        )
        assert (reply.status_code, reply.json()["code"]) == (status, code), (body, reply.text)
    reply = await client.patch(
        f"/v1/agents/{bob.agent_id}", json={"description": "mine now"}, headers=alice.headers()
    )
    assert (reply.status_code, reply.json()["code"]) == (403, "AB-1008"), reply.text
    owner = await _patch(
        client, alice, _owner(world), {"visibility": "tenant", "mode": "service"}, 200
    )
    assert (owner["visibility"], owner["mode"]) == ("tenant", "service")


async def test_a_disabled_agent_neither_sends_nor_receives_until_enabled(
    gateway: Gateway, gateway_client: httpx.AsyncClient
) -> None:
    client, world = gateway_client, await make_world(gateway, "acme")
    alice, bob = await enroll(client, world, "alice"), await enroll(client, world, "bob")
    await _patch(client, bob, _owner(world), {"status": "disabled"}, 200)
    await asyncio.sleep(DIRECTORY_TTL_S + 0.1)
    reply = await post_signed(client, alice, alice.envelope(bob.address, {"text": "hello"}))
    assert (reply.status_code, reply.json()["code"]) == (409, "AB-3003"), reply.text
    reply = await client.get("/v1/inbox", params={"wait_s": 0}, headers=bob.headers())
    assert (reply.status_code, reply.json()["code"]) == (403, "AB-1014"), reply.text

    await _patch(client, bob, _owner(world), {"status": "registered"}, 200)
    await asyncio.sleep(DIRECTORY_TTL_S + 0.1)
    await post_envelope(client, alice, alice.envelope(bob.address, {"text": "back"}))
    reply = await client.get("/v1/inbox", params={"wait_s": 5}, headers=bob.headers())
    assert len(reply.json()["deliveries"]) == 1, reply.text


async def test_strict_order_reaches_the_consumer(
    gateway: Gateway, gateway_client: httpx.AsyncClient
) -> None:
    client, world = gateway_client, await make_world(gateway, "acme")
    bob = await enroll(client, world, "bob")
    await _patch(client, bob, _owner(world), {"delivery": {"strict_order": True}}, 200)
    info = await gateway.broker.js.consumer_info(
        stream_name(world.tenant_id), "agt_" + bob.agent_id[4:]
    )
    assert info.config.max_ack_pending == 1


async def test_a_deleted_agents_waiting_messages_are_discarded_and_it_is_gone(
    gateway: Gateway, gateway_client: httpx.AsyncClient, agentbus_db: str
) -> None:
    client, world = gateway_client, await make_world(gateway, "acme")
    alice = await enroll(client, world, "alice")
    bob = await enroll(client, world, "bob", capabilities=REVIEW)
    request = alice.task_request(bob.address, "review-1", {"instructions": "review PR 7"})
    await post_envelope(client, alice, request, route="/v1/tasks")
    sent = [
        await post_envelope(client, alice, alice.envelope(bob.address, {"text": f"n{n}"}))
        for n in (1, 2)
    ]
    reply = await client.delete(f"/v1/agents/{bob.agent_id}", headers=alice.headers())
    assert reply.status_code == 401, reply.text  # an agent credential cannot delete
    sender_only = await owner_token(gateway, world, ["send", "receive"])
    reply = await client.delete(f"/v1/agents/{bob.agent_id}", headers=sender_only)
    assert (reply.status_code, reply.json()["code"]) == (403, "AB-1007"), reply.text
    reply = await client.patch(
        f"/v1/agents/{bob.agent_id}", json={"status": "disabled"}, headers=sender_only
    )
    assert (reply.status_code, reply.json()["code"]) == (403, "AB-1007"), reply.text
    reply = await client.delete(f"/v1/agents/{bob.agent_id}", headers=_owner(world))
    assert reply.status_code == 204, reply.text

    for answer in sent:
        status = await client.get(
            f"/v1/messages/{answer['message']['id']}", headers=alice.headers()
        )
        assert status.json()["status"] == "discarded", status.text
    reply = await client.get(f"/v1/agents/{bob.agent_id}", headers=_owner(world))
    assert (reply.status_code, reply.json()["code"]) == (404, "AB-8002"), reply.text
    reply = await client.delete(f"/v1/agents/{bob.agent_id}", headers=_owner(world))
    assert reply.status_code == 404, reply.text
    await asyncio.sleep(DIRECTORY_TTL_S + 0.1)
    reply = await post_signed(client, alice, alice.envelope(bob.address, {"text": "hello"}))
    assert (reply.status_code, reply.json()["code"]) == (404, "AB-3002"), reply.text
    with pytest.raises(NotFoundError):
        await gateway.broker.js.consumer_info(
            stream_name(world.tenant_id), "agt_" + bob.agent_id[4:]
        )
    async with tenant_transaction(gateway.pool, SCOPE, world.tenant_id) as conn:
        actions = await list_audit_actions(conn, world.tenant_id)
    [deleted] = [a for a in actions if a["action"] == "agent.delete"]
    assert (deleted["target_id"], deleted["details"]["discarded"]) == (bob.agent_id, 3)
    reply = await client.get(f"/v1/tasks/{request['subject']}", headers=alice.headers())
    task = reply.json()
    assert (task["state"], task["error_code"]) == ("failed", "AB-6011"), reply.text
