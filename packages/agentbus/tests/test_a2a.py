"""A2A through the app on real PostgreSQL and NATS, with the a2a-sdk client (protocol 1.0): the
tenant's card and an agent's card resolve and parse; SendMessage makes a task at the agent (sent
again, the same task), which the agent sees from the workspace's bridge, accepts and completes;
GetTask follows it to COMPLETED with its result; CancelTask stops another; refusals are JSON-RPC
errors or AB problems, never a 5xx; another tenant's token finds nothing."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from a2a.client.card_resolver import A2ACardResolver
from a2a.client.transports.jsonrpc import JsonRpcTransport
from a2a.types.a2a_pb2 import (
    ROLE_USER,
    TASK_STATE_CANCELED,
    TASK_STATE_COMPLETED,
    TASK_STATE_SUBMITTED,
    AgentCard,
    CancelTaskRequest,
    GetTaskRequest,
    Message,
    Part,
    SendMessageRequest,
)
from agentbus.gateway.context import Gateway
from agentbus.gateway.testkit import (
    SimAgent,
    World,
    alice_and_bob,
    make_world,
    owner_token,
    poll_inbox,
    post_signed,
)
from google.protobuf.struct_pb2 import Struct

Json = dict[str, Any]
SCHEMA = "https://agentbus.exchange/schemas/"
BASE = "http://gateway.test"


@pytest.fixture
async def pair(
    gateway: Gateway, gateway_client: httpx.AsyncClient
) -> tuple[World, SimAgent, SimAgent]:
    return await alice_and_bob(gateway, gateway_client)


def a2a_message(message_id: str, text: str, **metadata: Any) -> Message:
    meta = Struct()
    meta.update(metadata)
    return Message(message_id=message_id, role=ROLE_USER, parts=[Part(text=text)], metadata=meta)


def verb(sender: SimAgent, to_address: str, request: Json, name: str, data: Json) -> Json:
    kind = f"agentbus.task.{name}.v1"
    env = sender.envelope(to_address, data)
    env.update(type=kind, dataschema=f"{SCHEMA}{kind}.json", subject=request["subject"],
               correlation=request["id"], conversation=request["conversation"])  # fmt: skip
    return env


async def card(client: httpx.AsyncClient, token: str, path: str | None = None) -> AgentCard:
    resolver = A2ACardResolver(client, BASE)
    headers = {"Authorization": f"Bearer {token}"}
    return await resolver.get_agent_card(relative_card_path=path, http_kwargs={"headers": headers})


async def test_an_a2a_client_asks_an_agent_for_work(
    gateway_client: httpx.AsyncClient, pair: tuple[World, SimAgent, SimAgent]
) -> None:
    client, (world, _alice, bob) = gateway_client, pair
    tenant = await card(client, world.token)
    assert tenant.supported_interfaces[0].url == f"{BASE}/a2a/v1"
    assert tenant.supported_interfaces[0].protocol_binding == "JSONRPC"
    assert [s.id for s in tenant.skills] == ["bob/code.review"]
    mine = await card(client, world.token, f"/v1/agents/{bob.agent_id}/card")
    assert mine.supported_interfaces[0].url == f"{BASE}/a2a/v1/agents/{bob.agent_id}"
    assert [s.id for s in mine.skills] == ["code.review"]
    assert "bearer" in mine.security_schemes

    client.headers["Authorization"] = f"Bearer {world.token}"
    a2a = JsonRpcTransport(client, mine, mine.supported_interfaces[0].url)
    budget = {"currency": "USD", "max": "2.00"}
    ask = SendMessageRequest(message=a2a_message("m-1", "review PR 7", budget=budget))
    sent = await a2a.send_message(ask)
    task = sent.task
    assert task.id.startswith("tsk_")
    assert task.context_id.startswith("cnv_")
    assert task.status.state == TASK_STATE_SUBMITTED
    again = await a2a.send_message(ask)
    assert again.task.id == task.id

    # Bob receives it from the workspace's bridge, accepts and completes it.
    [delivery] = (await poll_inbox(client, bob, wait_s=5))["deliveries"]
    request = delivery["envelope"]
    bridge = f"agent://{world.slug}/{world.workspace}/a2a-bridge"
    assert (request["source"], request["subject"]) == (bridge, task.id)
    assert request["data"]["instructions"] == "review PR 7"
    assert request["data"]["budget"] == budget
    for name, data in (("accept", {}), ("complete", {"summary": "two races found"})):
        reply = await post_signed(client, bob, verb(bob, bridge, request, name, data),
                                  f"/v1/tasks/{task.id}/{name}")  # fmt: skip
        assert reply.status_code == 202, reply.text
    done = await a2a.get_task(GetTaskRequest(id=task.id))
    assert done.status.state == TASK_STATE_COMPLETED
    assert done.artifacts[0].parts[0].text == "two races found"
    assert done.metadata["agentbus"]["state"] == "completed"

    # Another task, cancelled; cancelling it again is refused.
    other = (await a2a.send_message(SendMessageRequest(message=a2a_message("m-2", "x")))).task
    cancelled = await a2a.cancel_task(CancelTaskRequest(id=other.id))
    assert cancelled.status.state == TASK_STATE_CANCELED
    with pytest.raises(Exception, match="cannot be cancelled"):
        await a2a.cancel_task(CancelTaskRequest(id=other.id))
    with pytest.raises(Exception, match="no task"):
        await a2a.get_task(GetTaskRequest(id="tsk_" + "0" * 32))


async def rpc(client: httpx.AsyncClient, path: str, body: bytes, token: str) -> httpx.Response:
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    return await client.post(path, content=body, headers=headers)


async def test_refusals_are_json_rpc_errors_or_ab_problems(
    gateway: Gateway, gateway_client: httpx.AsyncClient, pair: tuple[World, SimAgent, SimAgent]
) -> None:
    client, (world, alice, bob) = gateway_client, pair
    path = f"/a2a/v1/agents/{bob.agent_id}"

    def call(method: str, params: Any, **extra: Any) -> bytes:
        return json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params,
                           **extra}).encode()  # fmt: skip

    message = {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "hi"}]}
    errors = {
        "not-rpc": (b'{"hello": 1}', -32600),
        "no-method": (call("tasks/resubscribe", {}), -32601),
        "params": (call("SendMessage", []), -32602),
        "no-parts": (call("SendMessage", {"message": {**message, "parts": []}}), -32602),
        "follow-up": (call("SendMessage", {"message": {**message, "taskId": "tsk_x"}}), -32004),
        "bad-capability": (call("SendMessage", {"message": {**message,
                                "metadata": {"capability": "Not A Cap"}}}), -32602),
        "bad-budget": (call("SendMessage", {"message": {**message,
                            "metadata": {"budget": {"currency": "EUR", "max": "1"}}}}), -32602),
        "unknown-task": (call("GetTask", {"id": "nope"}), -32001),
        "alice-is-no-bridge-task": (call("tasks/get", {"id": "tsk_" + alice.agent_id[4:]}), -32001),
        "not-json": (b"{", -32700),
    }  # fmt: skip
    for name, (body, code) in errors.items():
        reply = await rpc(client, path, body, world.token)
        assert reply.status_code == 200, (name, reply.text)
        assert reply.json()["error"]["code"] == code, (name, reply.text)

    # Hostile bodies are refused before JSON-RPC, each with its AB problem.
    hostile = {
        "nul": call("SendMessage", {"message": {**message, "parts": [{"text": "a\u0000b"}]}}),
        "huge-int": call("GetTask", {"id": "x", "historyLength": 2**70}),
        "deep": b'{"jsonrpc": "2.0", "params": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
        "huge": b'{"x": "' + b"y" * (2 * 1024 * 1024) + b'"}',
    }
    for name, body in hostile.items():
        reply = await rpc(client, path, body, world.token)
        assert 400 <= reply.status_code < 500, (name, reply.status_code, reply.text)
        assert reply.json()["code"] in {"AB-8001", "AB-5002"}, (name, reply.text)

    # Authentication: none, an agent's credential, a token without 'send', another tenant's.
    send = call("SendMessage", {"message": message})
    assert (await client.post(path, content=send)).status_code == 401
    assert (await rpc(client, path, send, bob.credential)).status_code == 401
    reader = (await owner_token(gateway, world, ["read_audit"]))["Authorization"].split()[1]
    refused = await rpc(client, path, send, reader)
    assert (refused.status_code, refused.json()["code"]) == (403, "AB-1007")
    other = await make_world(gateway, "globex")
    stranger = await rpc(client, path, send, other.token)
    assert stranger.json()["error"]["code"] == -32001
    outside = await client.get("/.well-known/agent-card.json",
                               headers={"Authorization": f"Bearer {other.token}"})  # fmt: skip
    assert outside.json()["skills"] == []
