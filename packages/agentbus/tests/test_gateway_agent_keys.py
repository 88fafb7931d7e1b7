"""An agent's keys against the real gateway app, PostgreSQL and NATS (04-API-SPEC §2.2,
§2.4): an agent adds its successor key, signs with it and revokes the old one; what is refused
on the way (a proof by another key, a revoked key back, the last usable key, another agent's
keys); who may list and revoke; and the audit rows."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
from agentbus.db import SCOPE
from agentbus.gateway.actions.agent_keys import MAX_USABLE_KEYS
from agentbus.gateway.context import Gateway
from agentbus.gateway.store.directory import DIRECTORY_TTL_S
from agentbus.gateway.testkit import (
    SimAgent,
    World,
    enroll,
    make_world,
    post_envelope,
    post_signed,
)
from agentbus.store.audit_actions import list_audit_actions
from platformkit.db.scope import tenant_transaction

Json = dict[str, Any]


async def _add(client: httpx.AsyncClient, agent: SimAgent, new: SimAgent, status: int) -> Json:
    body = {"public_key": new.public_key, "proof": new.proof(agent.agent_id)}
    reply = await client.post(
        f"/v1/agents/{agent.agent_id}/keys", json=body, headers=agent.headers()
    )
    assert reply.status_code == status, reply.text
    return dict(reply.json())


async def _credential(client: httpx.AsyncClient, world: World, agent: SimAgent) -> str:
    reply = await client.post(
        f"/v1/agents/{agent.agent_id}/credentials",
        json={"proof": agent.proof(agent.agent_id, agent.key_id)},
        headers={"Authorization": f"Bearer {world.token}"},
    )
    assert reply.status_code == 200, reply.text
    return str(reply.json()["access_token"])


def _successor(agent: SimAgent) -> SimAgent:
    """The same agent with a new key, before the gateway knows it."""
    return SimAgent(agent.address, agent_id=agent.agent_id, credential=agent.credential)


async def test_an_agent_rotates_its_key_and_revokes_the_old_one(
    gateway: Gateway, gateway_client: httpx.AsyncClient
) -> None:
    client, world = gateway_client, await make_world(gateway, "acme")
    alice, bob = await enroll(client, world, "alice"), await enroll(client, world, "bob")
    new = _successor(alice)
    added = await _add(client, alice, new, 201)
    new.key_id = added["id"]
    assert (await _add(client, alice, new, 200))["id"] == new.key_id  # asked again: the same

    listed = (await client.get(f"/v1/agents/{alice.agent_id}/keys", headers=bob.headers())).json()
    assert [k["id"] for k in listed] == [alice.key_id, new.key_id]
    assert listed[1]["public_key"] == new.public_key
    assert {k["spiffe_id"] for k in listed} == {listed[0]["spiffe_id"]}

    await post_envelope(client, alice, alice.envelope(bob.address, {"text": "old key"}))
    new.credential = await _credential(client, world, new)  # a credential by the new key
    await post_envelope(client, new, new.envelope(bob.address, {"text": "new key"}))

    old_key = f"/v1/agents/{alice.agent_id}/keys/{alice.key_id}"
    reply = await client.delete(old_key, headers=new.headers())
    assert reply.status_code == 204, reply.text
    assert (await client.delete(old_key, headers=new.headers())).status_code == 204
    await asyncio.sleep(DIRECTORY_TTL_S + 0.1)  # every instance has seen the revocation
    reply = await post_signed(client, alice, alice.envelope(bob.address, {"text": "hello"}))
    assert (reply.status_code, reply.json()["code"]) == (422, "AB-2012"), reply.text
    reply = await client.delete(
        f"/v1/agents/{alice.agent_id}/keys/{new.key_id}", headers=new.headers()
    )
    assert (reply.status_code, reply.json()["code"]) == (409, "AB-8008"), reply.text
    alice.credential = new.credential
    reply = await client.post(
        f"/v1/agents/{alice.agent_id}/keys",
        json={"public_key": alice.public_key, "proof": alice.proof(alice.agent_id)},
        headers=new.headers(),
    )  # the revoked key, back
    assert (reply.status_code, reply.json()["code"]) == (409, "AB-8008"), reply.text

    async with tenant_transaction(gateway.pool, SCOPE, world.tenant_id) as conn:
        actions = await list_audit_actions(conn, world.tenant_id)
    keyed = {(a["action"], a["target_id"]) for a in actions if a["action"].startswith("agent.key")}
    assert keyed == {("agent.key.add", new.key_id), ("agent.key.revoke", alice.key_id)}


async def test_keys_are_added_by_the_agent_itself_with_a_proof_by_the_new_key(
    gateway: Gateway, gateway_client: httpx.AsyncClient
) -> None:
    client, world = gateway_client, await make_world(gateway, "acme")
    alice, bob = await enroll(client, world, "alice"), await enroll(client, world, "bob")
    new = _successor(alice)
    body = {"public_key": new.public_key, "proof": alice.proof(alice.agent_id)}  # old key signs
    reply = await client.post(
        f"/v1/agents/{alice.agent_id}/keys", json=body, headers=alice.headers()
    )
    assert (reply.status_code, reply.json()["code"]) == (401, "AB-1009"), reply.text
    body = {"public_key": new.public_key, "proof": new.proof(alice.agent_id)}
    reply = await client.post(f"/v1/agents/{alice.agent_id}/keys", json=body, headers=bob.headers())
    assert (reply.status_code, reply.json()["code"]) == (403, "AB-1008"), reply.text
    reply = await client.delete(
        f"/v1/agents/{alice.agent_id}/keys/{alice.key_id}", headers=bob.headers()
    )
    assert (reply.status_code, reply.json()["code"]) == (403, "AB-1008"), reply.text
    for _ in range(MAX_USABLE_KEYS - 1):
        await _add(client, alice, _successor(alice), 201)
    reply = await client.post(
        f"/v1/agents/{alice.agent_id}/keys",
        json={"public_key": new.public_key, "proof": new.proof(alice.agent_id)},
        headers=alice.headers(),
    )
    assert (reply.status_code, reply.json()["code"]) == (409, "AB-8008"), reply.text


async def test_tokens_list_revoke_and_vouch_for_keys_within_their_tenant(
    gateway: Gateway, gateway_client: httpx.AsyncClient
) -> None:
    client, world = gateway_client, await make_world(gateway, "acme")
    other = await make_world(gateway, "globex")
    alice, mallory = await enroll(client, world, "alice"), await enroll(client, other, "mallory")
    new = _successor(alice)
    new.key_id = (await _add(client, alice, new, 201))["id"]
    keys_path = f"/v1/agents/{alice.agent_id}/keys"
    operator = {"Authorization": f"Bearer {world.token}"}
    reply = await client.get(keys_path, headers=operator)
    assert [k["id"] for k in reply.json()] == [alice.key_id, new.key_id], reply.text
    for headers in ({"Authorization": f"Bearer {other.token}"}, mallory.headers()):
        reply = await client.get(keys_path, headers=headers)
        assert (reply.status_code, reply.json()["code"]) == (404, "AB-8002"), reply.text
        reply = await client.delete(f"{keys_path}/{alice.key_id}", headers=headers)
        assert (reply.status_code, reply.json()["code"]) == (404, "AB-8002"), reply.text
    reply = await client.delete(f"{keys_path}/{alice.key_id}", headers=operator)
    assert reply.status_code == 204, reply.text
    [old, current] = (await client.get(keys_path, headers=operator)).json()
    assert (old["revoked_at"] is not None, current["revoked_at"]) == (True, None)
    # a credential issued for the revoked key can no longer add keys
    later = _successor(alice)
    body = {"public_key": later.public_key, "proof": later.proof(alice.agent_id)}
    reply = await client.post(keys_path, json=body, headers=alice.headers())
    assert (reply.status_code, reply.json()["code"]) == (401, "AB-1010"), reply.text
    # but the owner's token vouches for a new key, and the agent keeps its address
    reply = await client.post(keys_path, json=body, headers=operator)
    assert reply.status_code == 201, reply.text
    later.key_id = reply.json()["id"]
    later.credential = (
        await client.post(
            f"/v1/agents/{alice.agent_id}/credentials",
            json={"proof": later.proof(alice.agent_id, later.key_id)},
            headers=operator,
        )
    ).json()["access_token"]
    await post_envelope(client, later, later.envelope(later.address, {"text": "still me"}))
