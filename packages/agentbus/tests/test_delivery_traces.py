"""Traces through the app, on real PostgreSQL and NATS (04-API-SPEC §4.4, §4.5): a message's
steps from send to read, a task request's state changes, receipts that verify, the messages of
a trace id; and nothing of it for anyone but the message's sender and recipient and the
tenant's operators, whose reads of a payload are audited."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from agentbus.actions import workspaces
from agentbus.actions.context import Actor, Ctx
from agentbus.db import SCOPE
from agentbus.delivery.domain import MAX_DELIVER, MAX_DELIVERIES
from agentbus.delivery.traces import timeline
from agentbus.gateway.context import Gateway
from agentbus.gateway.domain.wire import format_ts
from agentbus.gateway.testkit import (
    SimAgent,
    World,
    enroll,
    make_world,
    nak_until_dead_lettered,
    owner_token,
    post_envelope,
)
from agentbus.ids import format_id, parse_id
from agentbus.store import plans
from agentbus.store.audit_actions import list_audit_actions
from agentbus.store.integration_tokens import verify_integration_token
from hypothesis import given
from hypothesis import strategies as st
from platformkit.db.scope import tenant_transaction

Json = dict[str, Any]
REVIEW = [{"name": "code.review", "version": "1", "description": "Review a diff"}]
STEPS = ["message.accepted", "message.published", "message.fetched", "message.delivered",
         "message.read"]  # fmt: skip


@pytest.fixture
async def trio(
    gateway: Gateway, gateway_client: httpx.AsyncClient
) -> tuple[World, SimAgent, SimAgent, SimAgent]:
    world = await make_world(gateway, "acme")
    alice = await enroll(gateway_client, world, "alice")
    bob = await enroll(gateway_client, world, "bob", capabilities=REVIEW)
    carol = await enroll(gateway_client, world, "carol")
    return world, alice, bob, carol


async def _get(client: httpx.AsyncClient, agent: SimAgent, path: str, status: int = 200) -> Json:
    reply = await client.get(path, headers=agent.headers())
    assert reply.status_code == status, reply.text
    return dict(reply.json())


async def _receive(client: httpx.AsyncClient, bob: SimAgent, msg_id: str) -> None:
    """bob pulls the message, acks its transport, and reads it."""
    reply = await client.get("/v1/inbox", params={"wait_s": 5}, headers=bob.headers())
    [delivery] = reply.json()["deliveries"]
    assert delivery["msg_id"] == msg_id
    ack = {"msg_id": msg_id, "ack_token": delivery["ack_token"]}
    reply = await client.post("/v1/inbox/ack", json={"acks": [ack]}, headers=bob.headers())
    assert reply.status_code == 200, reply.text
    read = {"msg_id": msg_id, "read_at": format_ts(datetime.now(UTC))}
    reply = await client.post("/v1/inbox/read", json={"reads": [read]}, headers=bob.headers())
    assert reply.status_code == 200, reply.text


async def test_a_trace_follows_a_message_from_send_to_read(
    gateway_client: httpx.AsyncClient, trio: tuple[World, SimAgent, SimAgent, SimAgent]
) -> None:
    client, (_world, alice, bob, _carol) = gateway_client, trio
    env = alice.envelope(bob.address, {"text": "trace me"})
    sent = await post_envelope(client, alice, env)
    await _receive(client, bob, env["id"])

    trace = await _get(client, alice, f"/v1/messages/{env['id']}/trace")

    assert trace["source"] == "postgres"
    assert trace["message"]["status"] == "read"
    assert [e["event"] for e in trace["events"]] == STEPS
    assert [e["attempt"] for e in trace["events"]] == [0, 0, 1, 1, 1]
    assert trace["events"][0]["latency_ms"] is None
    assert all(e["latency_ms"] >= 0 for e in trace["events"][1:])
    assert trace["events"][1]["details"] == {"stream_seq": sent["receipt"]["seq"]}
    [receipt] = trace["receipts"]
    assert receipt["id"] == sent["receipt"]["id"]
    assert receipt["kid"] is not None
    assert trace["delivery"]["attempt"] == 1
    assert trace["delivery"]["dlq_reason"] is None
    assert await _get(client, bob, f"/v1/messages/{env['id']}/trace") == trace


async def test_a_receipt_says_whether_it_verifies_and_where_its_message_is(
    gateway: Gateway,
    gateway_client: httpx.AsyncClient,
    trio: tuple[World, SimAgent, SimAgent, SimAgent],
) -> None:
    client, (world, alice, bob, _carol) = gateway_client, trio
    env = alice.envelope(bob.address, {"text": "a receipt"})
    receipt = (await post_envelope(client, alice, env))["receipt"]

    found = await _get(client, bob, f"/v1/receipts/{receipt['id']}")
    assert (found["receipt"]["msg_id"], found["verified"]) == (env["id"], True)
    assert found["message_status"] == "accepted"
    assert found["receipt"]["signature"] == receipt["signature"]

    async with tenant_transaction(gateway.pool, SCOPE, world.tenant_id) as conn:
        await conn.execute(
            "UPDATE receipts SET signature = %s WHERE id = %s",
            (b"\x00" * 64, parse_id("rcp", receipt["id"])),
        )
    assert (await _get(client, alice, f"/v1/receipts/{receipt['id']}"))["verified"] is False


async def test_a_task_requests_trace_shows_its_state_changes(
    gateway_client: httpx.AsyncClient, trio: tuple[World, SimAgent, SimAgent, SimAgent]
) -> None:
    client, (_world, alice, bob, _carol) = gateway_client, trio
    env = alice.task_request(bob.address, "review-1", {"instructions": "review the patch"})
    await post_envelope(client, alice, env, "/v1/tasks")
    await _receive(client, bob, env["id"])

    trace = await _get(client, alice, f"/v1/messages/{env['id']}/trace")

    moves = [e["details"] for e in trace["events"] if e["event"] == "task.state_changed"]
    assert [(m["from"], m["to"]) for m in moves] == [
        (None, "submitted"),
        ("submitted", "delivered"),
    ]


async def test_only_the_parties_see_a_trace_a_receipt_or_a_trace_id(
    gateway: Gateway,
    gateway_client: httpx.AsyncClient,
    trio: tuple[World, SimAgent, SimAgent, SimAgent],
) -> None:
    client, (_world, alice, bob, carol) = gateway_client, trio
    env = alice.envelope(bob.address, {"text": "for bob only"})
    receipt = (await post_envelope(client, alice, env))["receipt"]
    trace_id = (await _get(client, alice, f"/v1/messages/{env['id']}"))["trace_id"]
    other_world = await make_world(gateway, "globex")
    mallory = await enroll(client, other_world, "mallory")

    for outsider in (carol, mallory):
        for path in (f"/v1/messages/{env['id']}/trace", f"/v1/receipts/{receipt['id']}"):
            refused = await _get(client, outsider, path, 404)
            assert refused["code"] == "AB-8002", refused
        assert (await _get(client, outsider, f"/v1/traces/{trace_id}"))["messages"] == []
    for party in (alice, bob):
        listed = await _get(client, party, f"/v1/traces/{trace_id}")
        assert [m["id"] for m in listed["messages"]] == [env["id"]]
    for path in ("/v1/messages/msg_nonsense/trace", "/v1/receipts/rcp_x", "/v1/traces/XYZ"):
        assert (await _get(client, alice, path, 404))["code"] == "AB-8002"


_steps = st.lists(
    st.tuples(st.sampled_from(["message.fetched", "message.nak", "task"]),
              st.integers(min_value=0, max_value=10**7)),
    min_size=1, max_size=12,
)  # fmt: skip


@given(_steps)
def test_a_timeline_is_in_time_order_and_its_latencies_add_up(
    steps: list[tuple[str, int]],
) -> None:
    base = datetime(2026, 12, 1, 9, 30, tzinfo=UTC)
    history = [
        {"event": event, "event_time": base + timedelta(milliseconds=offset), "attempt": 1,
         "actor": "gateway", "error_code": None, "policy_id": None, "details": {}}
        for event, offset in steps if event != "task"
    ]  # fmt: skip
    history.sort(key=lambda row: row["event_time"])  # as the store reads them
    moves = [
        {"at": base + timedelta(milliseconds=offset), "from_state": None, "to_state": "submitted",
         "reason": None, "by_msg_id": None}
        for event, offset in steps if event == "task"
    ]  # fmt: skip

    events = timeline(history, moves)

    assert len(events) == len(steps)
    assert events[0]["latency_ms"] is None
    latencies = [e["latency_ms"] for e in events[1:]]
    assert all(latency >= 0 for latency in latencies)
    offsets = [offset for _event, offset in steps]
    assert sum(latencies) == max(offsets) - min(offsets)


async def test_a_redriven_message_keeps_its_whole_story(
    gateway: Gateway,
    gateway_client: httpx.AsyncClient,
    trio: tuple[World, SimAgent, SimAgent, SimAgent],
) -> None:
    """Every attempt, nak and the dead-lettering stay in the trace after a redrive, and the
    second life follows them."""
    client, (world, alice, bob, _carol) = gateway_client, trio
    env = alice.envelope(bob.address, {"text": "again and again"})
    first_seq = (await post_envelope(client, alice, env))["receipt"]["seq"]
    await nak_until_dead_lettered(gateway, client, world, bob, env["id"])
    reply = await client.post(f"/v1/messages/{env['id']}/redrive", headers=alice.headers())
    assert reply.status_code == 202, reply.text
    second_seq = reply.json()["stream_seq"]
    await _receive(client, bob, env["id"])

    trace = await _get(client, alice, f"/v1/messages/{env['id']}/trace")

    steps = [(e["event"], e["attempt"]) for e in trace["events"]]
    first_life = [("message.accepted", 0), ("message.published", 0)]
    for attempt in range(1, MAX_DELIVER + 1):
        first_life += [("message.fetched", attempt), ("message.nak", attempt)]
    assert steps[: len(first_life)] == first_life
    rest = [event for event, _attempt in steps[len(first_life) :]]
    assert rest == ["message.dead_lettered", "message.redriven", "message.fetched",
                    "message.delivered", "message.read"]  # fmt: skip
    by_name = {e["event"]: e for e in trace["events"]}
    assert by_name["message.published"]["details"] == {"stream_seq": first_seq}
    assert by_name["message.redriven"]["details"] == {"stream_seq": second_seq}
    assert by_name["message.dead_lettered"]["details"]["reason"] == MAX_DELIVERIES
    assert by_name["message.dead_lettered"]["error_code"] == MAX_DELIVERIES  # analytics' too
    assert by_name["message.delivered"]["attempt"] == 1
    assert trace["delivery"]["dlq_reason"] is None  # the current state forgot it; events did not


async def test_operators_list_dead_letters_and_agents_their_own_messages(
    gateway: Gateway,
    gateway_client: httpx.AsyncClient,
    trio: tuple[World, SimAgent, SimAgent, SimAgent],
) -> None:
    client, (world, alice, bob, carol) = gateway_client, trio
    envs = [alice.envelope(bob.address, {"text": f"n{n}"}) for n in range(3)]
    for env in envs:
        await post_envelope(client, alice, env)
    reply = await client.get("/v1/inbox", params={"wait_s": 5}, headers=bob.headers())
    poison = next(d for d in reply.json()["deliveries"] if d["msg_id"] == envs[1]["id"])
    term = {
        "msg_id": poison["msg_id"],
        "ack_token": poison["ack_token"],
        "reason": "schema_unknown",
    }
    reply = await client.post("/v1/inbox/term", json={"terms": [term]}, headers=bob.headers())
    assert reply.status_code == 200, reply.text
    operator = {"Authorization": f"Bearer {world.token}"}

    async def listed(**params: Any) -> Json:
        reply = await client.get("/v1/messages", params=params, headers=operator)
        assert reply.status_code == 200, reply.text
        return dict(reply.json())

    [dead] = (await listed(status="dead_lettered"))["items"]
    assert (dead["id"], dead["dlq_reason"]) == (
        envs[1]["id"],
        "rejected_by_recipient:schema_unknown",
    )
    first = await listed(to=bob.agent_id, limit=2)
    rest = await listed(to=bob.agent_id, limit=2, cursor=first["next_cursor"])
    pages = [m["id"] for m in first["items"] + rest["items"]]
    assert pages == [env["id"] for env in reversed(envs)]
    assert rest["next_cursor"] is None
    assert (await listed(**{"from": bob.agent_id}))["items"] == []

    other = await make_world(gateway, "globex")
    reply = await client.get("/v1/messages", headers={"Authorization": f"Bearer {other.token}"})
    assert reply.json()["items"] == []
    for params in ({"status": "lost"}, {"to": "bob"}, {"cursor": "not-a-cursor"}):
        reply = await client.get("/v1/messages", params=params, headers=operator)
        assert reply.status_code in (400, 422), (params, reply.text)
    mine = (await client.get("/v1/messages", headers=alice.headers())).json()["items"]
    assert [m["id"] for m in mine] == [env["id"] for env in reversed(envs)]  # her own
    theirs = (await client.get("/v1/messages", headers=carol.headers())).json()["items"]
    assert theirs == [], "an agent lists only what it sent or received"


async def test_operators_read_messages_traces_and_receipts_within_their_reach(
    gateway: Gateway,
    gateway_client: httpx.AsyncClient,
    trio: tuple[World, SimAgent, SimAgent, SimAgent],
) -> None:
    client, (world, alice, bob, _carol) = gateway_client, trio
    env = alice.envelope(bob.address, {"text": "seen by the operators"})
    receipt = (await post_envelope(client, alice, env))["receipt"]
    owner = (await verify_integration_token(gateway.pool, world.token)).owner_user_id
    as_owner = Ctx(gateway.pool, Actor.user(world.tenant_id, owner))
    async with tenant_transaction(gateway.pool, SCOPE, world.tenant_id) as conn:
        await plans.override_limits(conn, world.tenant_id, {"workspaces": 2})
    other = await workspaces.create_workspace(
        as_owner, world.tenant_id, slug="other", display_name="other"
    )

    auditor = await owner_token(gateway, world, ["read_audit"])
    elsewhere = await owner_token(gateway, world, ["read_audit"], other["id"])
    sender_only = await owner_token(gateway, world, ["send"])
    trace_path, receipt_path = f"/v1/messages/{env['id']}/trace", f"/v1/receipts/{receipt['id']}"

    reply = await client.get(trace_path, headers=auditor)
    assert reply.json()["message"]["id"] == env["id"], reply.text
    reply = await client.get(receipt_path, headers=auditor)
    assert reply.json()["verified"] is True, reply.text
    for path in (trace_path, receipt_path):  # a token of another workspace
        reply = await client.get(path, headers=elsewhere)
        assert (reply.status_code, reply.json()["code"]) == (404, "AB-8002"), reply.text
    reply = await client.get("/v1/messages", headers=elsewhere)
    assert reply.json()["items"] == [], reply.text
    trace_id = (await client.get(trace_path, headers=auditor)).json()["message"]["trace_id"]
    for headers, seen in ((auditor, True), (elsewhere, False)):
        reply = await client.get(f"/v1/traces/{trace_id}", headers=headers)
        assert (env["id"] in [m["id"] for m in reply.json()["messages"]]) is seen, reply.text
    reply = await client.get(trace_path, headers=sender_only)
    assert (reply.status_code, reply.json()["code"]) == (403, "AB-1007"), reply.text

    message_path = f"/v1/messages/{env['id']}"
    reply = await client.get(message_path, headers=auditor)
    assert (reply.json()["id"], "envelope" in reply.json()) == (env["id"], False), reply.text
    assert await _payload_views(gateway, world) == []  # metadata is not a payload read
    reply = await client.get(message_path, params={"include": "envelope"}, headers=auditor)
    assert reply.json()["envelope"]["data"] == env["data"], reply.text
    assert reply.json()["sender_key"]["id"] == alice.key_id  # to verify the envelope with
    [view] = await _payload_views(gateway, world)
    assert (view["target_id"], view["actor_id"]) == (env["id"], format_id("usr", owner))
    assert view["details"]["via"].startswith("tok_")
    for headers, status in ((elsewhere, 404), (sender_only, 403)):
        reply = await client.get(message_path, params={"include": "envelope"}, headers=headers)
        assert reply.status_code == status, reply.text
    assert len(await _payload_views(gateway, world)) == 1


async def _payload_views(gateway: Gateway, world: World) -> list[Json]:
    async with tenant_transaction(gateway.pool, SCOPE, world.tenant_id) as conn:
        rows = await list_audit_actions(conn, world.tenant_id)
    return [row for row in rows if row["action"] == "message.view_payload"]
