"""Redrive against the real gateway app, PostgreSQL and NATS (04-API-SPEC §4.6, 05 §7.4): a
dead letter goes out again as a new copy and is read; who may redrive; what may not be
redriven; a copy pulled before its redrive commits waits instead of being dropped."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import psycopg
import pytest
from agentbus.db import SCOPE
from agentbus.delivery import store
from agentbus.delivery.domain import MAX_DELIVER
from agentbus.gateway.actions.publish import publish_message
from agentbus.gateway.context import Gateway
from agentbus.gateway.store import messages
from agentbus.gateway.testkit import (
    SimAgent,
    World,
    alice_and_bob,
    enroll,
    make_world,
    nak_until_dead_lettered,
    owner_token,
    poll_inbox,
    post_envelope,
    settle_inbox,
)
from agentbus.ids import parse_id
from agentbus.store.audit_actions import list_audit_actions
from platformkit.db.scope import tenant_transaction

Json = dict[str, Any]


@pytest.fixture
async def trio(
    gateway: Gateway, gateway_client: httpx.AsyncClient
) -> tuple[World, SimAgent, SimAgent]:
    return await alice_and_bob(gateway, gateway_client)


async def _rejected(client: httpx.AsyncClient, alice: SimAgent, bob: SimAgent, text: str) -> Json:
    """A message from alice that bob's sidecar terminated: dead-lettered."""
    env = alice.envelope(bob.address, {"text": text})
    await post_envelope(client, alice, env)
    [delivery] = (await poll_inbox(client, bob, wait_s=5))["deliveries"]
    term = {"msg_id": env["id"], "ack_token": delivery["ack_token"], "reason": "schema_unknown"}
    await settle_inbox(client, bob, "term", [term])
    return env


async def _redrive(
    client: httpx.AsyncClient, msg_id: str, headers: dict[str, str], status: int
) -> Json:
    reply = await client.post(f"/v1/messages/{msg_id}/redrive", headers=headers)
    assert reply.status_code == status, reply.text
    return dict(reply.json())


async def _delivery_state(gateway: Gateway, world: World, msg_id: str) -> Json:
    async with tenant_transaction(gateway.pool, SCOPE, world.tenant_id) as conn:
        cur = await conn.execute(
            "SELECT attempt, dlq_reason FROM delivery_state WHERE msg_id = %s",
            (parse_id("msg", msg_id),),
        )
        row = await cur.fetchone()
    assert row is not None
    return dict(row)


async def test_a_dead_letter_is_redriven_by_its_sender_and_read(
    gateway: Gateway, gateway_client: httpx.AsyncClient, trio: tuple[World, SimAgent, SimAgent]
) -> None:
    client, (world, alice, bob) = gateway_client, trio
    env = await _rejected(client, alice, bob, "try me again")
    before = (await client.get(f"/v1/messages/{env['id']}", headers=alice.headers())).json()
    assert before["status"] == "dead_lettered"

    problem = await _redrive(client, env["id"], bob.headers(), 403)  # the recipient may not
    assert problem["code"] == "AB-1008"
    redriven = await _redrive(client, env["id"], alice.headers(), 202)
    assert redriven["status"] == "accepted"
    assert redriven["stream_seq"] > before["stream_seq"]
    assert await _delivery_state(gateway, world, env["id"]) == {"attempt": 0, "dlq_reason": None}

    [delivery] = (await poll_inbox(client, bob, wait_s=5))["deliveries"]
    assert (delivery["msg_id"], delivery["attempt"]) == (env["id"], 1)
    assert delivery["envelope"]["data"] == {"text": "try me again"}
    [read] = await settle_inbox(client, bob, "read", [{"msg_id": env["id"]}])
    assert read["status"] == "read", read
    problem = await _redrive(client, env["id"], alice.headers(), 409)  # read: nothing to redo
    assert (problem["code"], problem["status_now"]) == ("AB-8009", "read")

    async with tenant_transaction(gateway.pool, SCOPE, world.tenant_id) as conn:
        actions = await list_audit_actions(conn, world.tenant_id)
    [action] = [a for a in actions if a["action"] == "message.redrive"]
    assert (action["target_id"], action["details"]["via"]) == (env["id"], "agent")
    assert action["details"]["dlq_reason"] == "rejected_by_recipient:schema_unknown"


async def test_max_deliveries_then_a_redrive_by_an_admin_token(
    gateway: Gateway, gateway_client: httpx.AsyncClient, trio: tuple[World, SimAgent, SimAgent]
) -> None:
    """The new copy gets MaxDeliver deliveries of its own: ``attempt`` starts again."""
    client, (world, alice, bob) = gateway_client, trio
    env = alice.envelope(bob.address, {"text": "poison, for now"})
    await post_envelope(client, alice, env)
    await nak_until_dead_lettered(gateway, client, world, bob, env["id"])
    assert (await _delivery_state(gateway, world, env["id"]))["dlq_reason"] == "max_deliveries"

    sender_only = await owner_token(gateway, world, ["send", "read_audit"])
    problem = await _redrive(client, env["id"], sender_only, 403)
    assert problem["code"] == "AB-1007"
    admin = await owner_token(gateway, world, ["admin"])
    assert (await _redrive(client, env["id"], admin, 202))["status"] == "accepted"

    [delivery] = (await poll_inbox(client, bob, wait_s=5))["deliveries"]
    assert (delivery["msg_id"], delivery["attempt"]) == (env["id"], 1)
    nak = {"msg_id": env["id"], "ack_token": delivery["ack_token"], "delay_ms": 0}
    await settle_inbox(client, bob, "nak", [nak])
    [again] = (await poll_inbox(client, bob, wait_s=5))["deliveries"]
    assert again["attempt"] == 2
    await settle_inbox(client, bob, "read", [{"msg_id": env["id"]}])
    message = (await client.get(f"/v1/messages/{env['id']}", headers=admin)).json()
    assert (message["status"], message["attempts"]) == ("read", MAX_DELIVER)


async def test_what_cannot_be_redriven(
    agentbus_db: str,
    gateway: Gateway,
    gateway_client: httpx.AsyncClient,
    trio: tuple[World, SimAgent, SimAgent],
) -> None:
    client, (world, alice, bob) = gateway_client, trio
    waiting = alice.envelope(bob.address, {"text": "not dead"})
    await post_envelope(client, alice, waiting)
    problem = await _redrive(client, waiting["id"], alice.headers(), 409)
    assert (problem["code"], problem["status_now"]) == ("AB-8009", "accepted")
    await poll_inbox(client, bob, wait_s=5)  # hands out the waiting message too

    expired = await _rejected(client, alice, bob, "too late")
    async with await psycopg.AsyncConnection.connect(agentbus_db, autocommit=True) as admin:
        await admin.execute(
            "UPDATE messages SET expires_at = now() - interval '1 second' WHERE id = %s",
            (parse_id("msg", expired["id"]),),
        )
    problem = await _redrive(client, expired["id"], alice.headers(), 409)
    assert problem["detail"] == "the message has expired"

    request = alice.task_request(bob.address, "k1", {"instructions": "review"})
    await post_envelope(client, alice, request, "/v1/tasks")
    [delivery] = (await poll_inbox(client, bob, wait_s=5))["deliveries"]
    term = {"msg_id": request["id"], "ack_token": delivery["ack_token"], "reason": "schema_unknown"}
    await settle_inbox(client, bob, "term", [term])
    problem = await _redrive(client, request["id"], alice.headers(), 409)
    assert "request the task again" in problem["detail"]

    gone = await _rejected(client, alice, bob, "to someone deleted")
    owner = {"Authorization": f"Bearer {world.token}"}
    reply = await client.delete(f"/v1/agents/{bob.agent_id}", headers=owner)
    assert reply.status_code == 204, reply.text
    problem = await _redrive(client, gone["id"], alice.headers(), 409)
    assert problem["detail"] == "the recipient no longer exists"

    other = await make_world(gateway, "globex")
    mallory = await enroll(client, other, "mallory")
    problem = await _redrive(client, gone["id"], mallory.headers(), 404)  # another tenant's
    assert problem["code"] == "AB-8002"
    problem = await _redrive(client, gone["id"], {"Authorization": f"Bearer {other.token}"}, 404)
    assert problem["code"] == "AB-8002"
    problem = await _redrive(client, "msg_nonsense", alice.headers(), 404)
    assert problem["code"] == "AB-8002"


async def test_a_copy_pulled_before_its_redrive_commits_waits_for_it(
    gateway: Gateway, gateway_client: httpx.AsyncClient, trio: tuple[World, SimAgent, SimAgent]
) -> None:
    """The moment between a redrive's publish and its commit, held open: the pull sees the new
    copy while the row still says ``dead_lettered``; it must not drop the copy."""
    client, (world, alice, bob) = gateway_client, trio
    env = await _rejected(client, alice, bob, "in the gap")
    msg_id = parse_id("msg", env["id"])
    async with tenant_transaction(gateway.pool, SCOPE, world.tenant_id) as conn:
        row = await messages.find_message(conn, world.tenant_id, msg_id)
    assert row is not None
    seq = await publish_message(gateway, row, msg_id_header=f"{env['id']}:rgap", record_seq=False)
    assert seq is not None
    assert seq > row["stream_seq"]

    assert (await poll_inbox(client, bob, wait_s=2))["deliveries"] == []  # naked, not dropped
    async with tenant_transaction(gateway.pool, SCOPE, world.tenant_id) as conn:
        locked = await store.lock_any(conn, world.tenant_id, msg_id, row["accepted_at"])
        assert locked is not None
        await store.record(conn, world.tenant_id, msg_id, parse_id("agt", bob.agent_id), "redrive")
        assert await store.redriven(conn, world.tenant_id, locked, seq)
    await asyncio.sleep(1.0)  # the nak's delay
    [delivery] = (await poll_inbox(client, bob, wait_s=5))["deliveries"]
    assert delivery["msg_id"] == env["id"]


async def test_a_redrive_nats_does_not_confirm_changes_nothing(
    gateway: Gateway, gateway_client: httpx.AsyncClient, trio: tuple[World, SimAgent, SimAgent]
) -> None:
    client, (world, alice, bob) = gateway_client, trio
    env = await _rejected(client, alice, bob, "while NATS is away")
    before = await _delivery_state(gateway, world, env["id"])
    await gateway.broker.close()
    problem = await _redrive(client, env["id"], alice.headers(), 503)
    assert problem["code"] == "AB-9003"
    assert await _delivery_state(gateway, world, env["id"]) == before
    status = (await client.get(f"/v1/messages/{env['id']}", headers=alice.headers())).json()
    assert status["status"] == "dead_lettered"
    async with tenant_transaction(gateway.pool, SCOPE, world.tenant_id) as conn:
        actions = await list_audit_actions(conn, world.tenant_id, action="message.redrive")
    assert actions == [], "the audit row went with the rolled-back transaction"

    await gateway.broker.start(wait=3.0)
    assert (await _redrive(client, env["id"], alice.headers(), 202))["status"] == "accepted"
    [delivery] = (await poll_inbox(client, bob, wait_s=5))["deliveries"]
    assert delivery["msg_id"] == env["id"]
