"""Cedar policies against the real gateway app, PostgreSQL and NATS (docs/agentbus/policies.md):
the default set keeps every send allowed; a forbid refuses sends, task requests, accepts and
reads with the AB code naming the policy; text failing the schema is refused on save; versions,
disabling and the dry run; decisions in /metrics; other tenants see none of it."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from agentbus.db import SCOPE
from agentbus.gateway.context import Gateway
from agentbus.gateway.testkit import (
    SimAgent,
    World,
    alice_and_bob,
    enroll,
    make_world,
    poll_inbox,
    post_envelope,
    post_signed,
)
from agentbus.store import plans
from platformkit.db.scope import tenant_transaction

Json = dict[str, Any]
SCHEMA_URL = "https://agentbus.exchange/schemas/"


@pytest.fixture
async def trio(
    gateway: Gateway, gateway_client: httpx.AsyncClient
) -> tuple[World, SimAgent, SimAgent]:
    return await alice_and_bob(gateway, gateway_client)


def _admin(world: World) -> dict[str, str]:
    return {"Authorization": f"Bearer {world.token}"}


async def _policy(
    client: httpx.AsyncClient, world: World, name: str, cedar: str, status: int = 201, **extra: Any
) -> Json:
    reply = await client.post(
        "/v1/policies", json={"name": name, "cedar": cedar, **extra}, headers=_admin(world)
    )
    assert reply.status_code == status, reply.text
    return dict(reply.json())


def _forbid(action: str, who: SimAgent, whom: SimAgent, when: str = "") -> str:
    condition = f" when {{ {when} }}" if when else ""
    return (
        f'forbid(principal == AgentBus::Agent::"{who.agent_id}",\n'
        f'       action == AgentBus::Action::"{action}",\n'
        f'       resource == AgentBus::Agent::"{whom.agent_id}"){condition};\n'
    )


async def _send(
    client: httpx.AsyncClient, sender: SimAgent, to: SimAgent, data: Json
) -> httpx.Response:
    return await post_signed(client, sender, sender.envelope(to.address, data))


def _verb(
    sender: SimAgent, to: SimAgent, request: Json, verb: str, data: Json | None = None
) -> Json:
    kind = f"agentbus.task.{verb}.v1"
    env = sender.envelope(to.address, data or {})
    env.update(type=kind, dataschema=f"{SCHEMA_URL}{kind}.json", subject=request["subject"],
               correlation=request["id"], conversation=request["conversation"])  # fmt: skip
    return env


async def _decisions(client: httpx.AsyncClient, action: str, decision: str) -> float:
    text = (await client.get("/metrics")).text
    line = f'agentbus_policy_decisions_total{{action="{action}",decision="{decision}"}}'
    found = [row for row in text.splitlines() if row.startswith(line)]
    return float(found[0].split()[-1]) if found else 0.0


async def test_a_tenant_starts_with_the_default_policy_and_sends_pass(
    gateway_client: httpx.AsyncClient, trio: tuple[World, SimAgent, SimAgent]
) -> None:
    client, (world, alice, bob) = gateway_client, trio
    listed = (await client.get("/v1/policies", headers=_admin(world))).json()["items"]
    assert [(p["name"], p["version"], p["enabled"]) for p in listed] == [("default", 1, True)]
    before = await _decisions(client, "send", "allow")
    await post_envelope(client, alice, alice.envelope(bob.address, {"text": "hello"}))
    assert await _decisions(client, "send", "allow") == before + 1


async def test_a_forbid_refuses_a_send_naming_its_policy_until_disabled(
    gateway_client: httpx.AsyncClient, trio: tuple[World, SimAgent, SimAgent]
) -> None:
    client, (world, alice, bob) = gateway_client, trio
    policy = await _policy(client, world, "no-alice-to-bob", _forbid("send", alice, bob))
    taken = await _policy(client, world, "no-alice-to-bob", _forbid("send", bob, alice), 409)
    assert taken["code"] == "AB-8003"
    denied_before = await _decisions(client, "send", "deny")

    refused = await _send(client, alice, bob, {"text": "blocked"})
    assert refused.status_code == 403, refused.text
    problem = refused.json()
    assert (problem["code"], problem["policy_id"], problem["policy"]) == (
        "AB-4001",
        policy["id"],
        "no-alice-to-bob",
    )
    assert problem["action"] == "send"
    assert await _decisions(client, "send", "deny") == denied_before + 1
    await post_envelope(client, bob, bob.envelope(alice.address, {"text": "the other way"}))

    reply = await client.patch(
        f"/v1/policies/{policy['id']}", json={"enabled": False}, headers=_admin(world)
    )
    assert reply.status_code == 200, reply.text
    assert reply.json()["enabled"] is False
    await post_envelope(client, alice, alice.envelope(bob.address, {"text": "allowed again"}))


async def test_size_and_attachment_conditions_and_new_versions(
    gateway_client: httpx.AsyncClient, trio: tuple[World, SimAgent, SimAgent]
) -> None:
    client, (world, alice, bob) = gateway_client, trio
    small = _forbid("send", alice, bob, "context.size_bytes > 200")
    policy = await _policy(client, world, "small-only", small)
    await post_envelope(client, alice, alice.envelope(bob.address, {"text": "short"}))
    assert (await _send(client, alice, bob, {"text": "x" * 300})).status_code == 403

    reply = await client.post(
        f"/v1/policies/{policy['id']}/versions",
        json={"cedar": _forbid("send", alice, bob, "context.attachments > 0")},
        headers=_admin(world),
    )
    assert reply.status_code == 201, reply.text
    assert reply.json()["version"] == 2
    await post_envelope(client, alice, alice.envelope(bob.address, {"text": "x" * 300}))
    shown = (await client.get(f"/v1/policies/{policy['id']}", headers=_admin(world))).json()
    assert [v["version"] for v in shown["history"]] == [1, 2]


async def test_task_requests_and_accepts_answer_to_their_own_actions(
    gateway_client: httpx.AsyncClient, trio: tuple[World, SimAgent, SimAgent]
) -> None:
    client, (world, alice, bob) = gateway_client, trio
    cedar = (
        'forbid(principal, action == AgentBus::Action::"request_task", resource)\n'
        '  when { context.capability == "code.review" && context.size_bytes > 200 };\n'
        + _forbid("accept_task", bob, alice, "context.hour >= 0")
    )
    policy = await _policy(client, world, "tasks", cedar)
    big = alice.task_request(bob.address, "big-1", {"instructions": "read all " + "x" * 300})
    refused = await post_signed(client, alice, big, "/v1/tasks")
    assert refused.status_code == 403, refused.text
    assert (refused.json()["policy_id"], refused.json()["action"]) == (policy["id"], "request_task")

    review = alice.task_request(bob.address, "review-1", {"instructions": "look"})
    await post_envelope(client, alice, review, "/v1/tasks")
    [delivery] = (await poll_inbox(client, bob, wait_s=5))["deliveries"]
    assert delivery["msg_id"] == review["id"]
    accept = _verb(bob, alice, review, "accept")
    refused = await post_signed(client, bob, accept, f"/v1/tasks/{review['subject']}/accept")
    assert refused.status_code == 403, refused.text
    assert refused.json()["action"] == "accept_task"
    reject = _verb(
        bob, alice, review, "reject", {"code": "busy", "message": "not now"}
    )  # the later task verbs are not policed
    reply = await post_signed(client, bob, reject, f"/v1/tasks/{review['subject']}/reject")
    assert reply.status_code == 202, reply.text


async def test_a_read_forbidden_after_the_send_discards_the_message(
    gateway_client: httpx.AsyncClient, trio: tuple[World, SimAgent, SimAgent]
) -> None:
    client, (world, alice, bob) = gateway_client, trio
    env = alice.envelope(bob.address, {"text": "allowed when sent"})
    await post_envelope(client, alice, env)
    policy = await _policy(
        client, world, "bob-reads-nothing-from-alice", _forbid("read", bob, alice)
    )

    assert (await poll_inbox(client, bob, wait_s=2))["deliveries"] == []
    trace = (await client.get(f"/v1/messages/{env['id']}/trace", headers=alice.headers())).json()
    assert trace["message"]["status"] == "discarded"
    [discarded] = [e for e in trace["events"] if e["event"] == "message.discarded"]
    assert discarded["error_code"] == "AB-4004"
    assert discarded["details"]["policy_id"] == policy["id"]


async def test_text_failing_the_schema_is_refused_and_nothing_is_stored(
    gateway_client: httpx.AsyncClient, trio: tuple[World, SimAgent, SimAgent]
) -> None:
    client, (world, _alice, _bob) = gateway_client, trio
    for cedar in (
        "permit(principal, action, resource) when { context.sizee > 3 };",
        'permit(principal, action == AgentBus::Action::"delete", resource);',
        "this is not cedar",
        "// only a comment",
    ):
        problem = await _policy(client, world, "bad", cedar, status=422)
        assert problem["code"] == "AB-4003", problem
        assert problem["errors"], problem
    listed = (await client.get("/v1/policies", headers=_admin(world))).json()["items"]
    assert [p["name"] for p in listed] == ["default"]
    schema = (await client.get("/v1/policies/schema", headers=_admin(world))).json()
    assert "action send, request_task, accept_task, read" in schema["schema"]


async def test_a_workspace_policy_binds_only_that_workspaces_agents(
    gateway: Gateway, gateway_client: httpx.AsyncClient, trio: tuple[World, SimAgent, SimAgent]
) -> None:
    client, (world, alice, bob) = gateway_client, trio
    async with tenant_transaction(gateway.pool, SCOPE, world.tenant_id) as conn:
        await plans.override_limits(conn, world.tenant_id, {"workspaces": 2})
    ops = await client.post(
        "/v1/workspaces", json={"slug": "ops", "display_name": "Ops"}, headers=_admin(world)
    )
    assert ops.status_code == 201, ops.text
    cedar = 'forbid(principal, action == AgentBus::Action::"send", resource);'
    await _policy(client, world, "ops-silent", cedar, workspace=ops.json()["id"])
    await post_envelope(client, alice, alice.envelope(bob.address, {"text": "main is free"}))
    in_ops = World(world.tenant_id, world.slug, ops.json()["id"], "ops", world.token)
    carol = await enroll(client, in_ops, "carol", visibility="tenant")
    dave = await enroll(client, world, "dave", visibility="tenant")  # seen from ops
    refused = await _send(client, carol, dave, {"text": "ops may not"})
    assert refused.status_code == 403, refused.text
    assert refused.json()["policy"] == "ops-silent"
    await post_envelope(client, dave, dave.envelope(carol.address, {"text": "main may"}))


async def test_the_dry_run_lists_what_a_draft_would_refuse(
    gateway_client: httpx.AsyncClient, trio: tuple[World, SimAgent, SimAgent]
) -> None:
    client, (world, alice, bob) = gateway_client, trio
    sent = [alice.envelope(bob.address, {"text": f"n{n}"}) for n in range(3)]
    for env in sent:
        await post_envelope(client, alice, env)
    await post_envelope(client, bob, bob.envelope(alice.address, {"text": "reply"}))

    reply = await client.post(
        "/v1/policies/dry-run",
        json={"name": "draft", "cedar": _forbid("send", alice, bob), "last": 3},
        headers=_admin(world),
    )
    assert reply.status_code == 200, reply.text
    result = reply.json()
    assert result["replayed"] == 3  # the last three: bob's reply and alice's n2, n1
    assert {r["msg_id"] for r in result["refused"]} == {sent[1]["id"], sent[2]["id"]}
    assert {(r["action"], r["policy"]) for r in result["refused"]} == {("send", "draft")}
    listed = (await client.get("/v1/policies", headers=_admin(world))).json()["items"]
    assert [p["name"] for p in listed] == ["default"]  # a dry run stores nothing
    bad = await client.post("/v1/policies/dry-run", json={"cedar": "nope"}, headers=_admin(world))
    assert bad.json()["code"] == "AB-4003"


async def test_other_tenants_and_non_admins_see_no_policy(
    gateway: Gateway, gateway_client: httpx.AsyncClient, trio: tuple[World, SimAgent, SimAgent]
) -> None:
    client, (world, alice, bob) = gateway_client, trio
    policy = await _policy(client, world, "mine", _forbid("send", alice, bob))
    other = await make_world(gateway, "globex")
    for path in (f"/v1/policies/{policy['id']}", "/v1/policies/pol_nonsense"):
        reply = await client.get(path, headers=_admin(other))
        assert (reply.status_code, reply.json()["code"]) == (404, "AB-8002"), reply.text
    reply = await client.patch(
        f"/v1/policies/{policy['id']}", json={"enabled": False}, headers=_admin(other)
    )
    assert reply.status_code == 404, reply.text
    assert [p["name"] for p in (await client.get("/v1/policies", headers=_admin(other))).json()[
        "items"]] == ["default"]  # fmt: skip
    assert (await client.get("/v1/policies", headers=alice.headers())).status_code in (401, 403)
