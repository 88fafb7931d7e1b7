"""Tasks end to end through the app on real PostgreSQL and NATS: request -> delivered (transport
ack) -> accept -> progress -> complete, with transition rows; a repeated request under the same
idempotency key answers the same task; the wrong party, a terminal task, a bad capability."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from agentbus.gateway.context import Gateway
from agentbus.gateway.testkit import (
    SimAgent,
    World,
    alice_and_bob,
    enroll,
    post_signed,
)

Json = dict[str, Any]
SCHEMA = "https://agentbus.exchange/schemas/"


def request_env(alice: SimAgent, bob: SimAgent, key: str, data: Json | None = None) -> Json:
    return alice.task_request(bob.address, key, data or {"instructions": "review PR 4411"})


def verb_env(sender: SimAgent, to: SimAgent, request: Json, verb: str, data: Json) -> Json:
    kind = f"agentbus.task.{verb}.v1"
    env = sender.envelope(to.address, data)
    env.update(
        type=kind,
        dataschema=f"{SCHEMA}{kind}.json",
        subject=request["subject"],
        correlation=request["id"],
        conversation=request["conversation"],
    )
    return env


async def post(client: httpx.AsyncClient, agent: SimAgent, path: str, env: Json) -> httpx.Response:
    return await post_signed(client, agent, env, path)


async def task_of(client: httpx.AsyncClient, agent: SimAgent, task_id: str) -> Json:
    reply = await client.get(f"/v1/tasks/{task_id}", headers=agent.headers())
    assert reply.status_code == 200, reply.text
    return dict(reply.json())


@pytest.fixture
async def pair(
    gateway: Gateway, gateway_client: httpx.AsyncClient
) -> tuple[World, SimAgent, SimAgent]:
    return await alice_and_bob(gateway, gateway_client)


async def test_request_accept_progress_complete(
    gateway_client: httpx.AsyncClient, pair: tuple[World, SimAgent, SimAgent]
) -> None:
    client, (_world, alice, bob) = gateway_client, pair
    data = {"instructions": "review", "budget": {"currency": "USD", "max": "2.00"}}
    request = request_env(alice, bob, "pr-4411", data)
    task_id = request["subject"]
    sent = await post(client, alice, "/v1/tasks", request)
    assert sent.status_code == 202, sent.text
    assert sent.json()["task"] == {"id": task_id, "state": "submitted"}

    # The recipient takes custody of the request: the task is delivered.
    polled = await client.get("/v1/inbox", params={"wait_s": 5}, headers=bob.headers())
    [delivery] = polled.json()["deliveries"]
    assert delivery["envelope"]["subject"] == task_id
    ack = {"msg_id": request["id"], "ack_token": delivery["ack_token"]}
    await client.post("/v1/inbox/ack", json={"acks": [ack]}, headers=bob.headers())
    seen = await task_of(client, alice, task_id)
    assert seen["state"] == "delivered"
    assert seen["delivered_at"] is not None
    assert seen["budget"] == {"currency": "USD", "max": "2.00"}

    path = f"/v1/tasks/{task_id}"
    accepted = await post(
        client, bob, f"{path}/accept", verb_env(bob, alice, request, "accept", {})
    )
    assert accepted.status_code == 202, accepted.text
    assert accepted.json()["task"]["state"] == "accepted"
    for percent, cost in ((40, "0.10"), (80, "0.42")):
        progress = {"percent": percent, "stage": "reading", "usage": {"cost_usd": cost}}
        reply = await post(
            client, bob, f"{path}/progress", verb_env(bob, alice, request, "progress", progress)
        )
        assert reply.status_code == 202, reply.text
        assert reply.json()["task"]["state"] == "in_progress"
    done = verb_env(bob, alice, request, "complete", {"summary": "two races found"})
    completed = await post(client, bob, f"{path}/complete", done)
    assert completed.status_code == 202, completed.text

    final = await task_of(client, bob, task_id)
    assert final["state"] == "completed"
    assert final["result_msg_id"] == done["id"]
    assert final["progress"]["percent"] == 80
    assert final["spent"] == "0.420000"
    assert final["requester"] == alice.address
    assert final["recipient"] == bob.address
    assert final["duration_ms"] is not None

    trail = (await client.get(f"{path}/transitions", headers=alice.headers())).json()
    assert [(t["from_state"], t["to_state"]) for t in trail] == [
        (None, "submitted"),
        ("submitted", "delivered"),
        ("delivered", "accepted"),
        ("accepted", "in_progress"),
        ("in_progress", "completed"),
    ]
    assert trail[-1]["by_msg_id"] == done["id"]

    # A finished task absorbs: the requester's cancel is refused.
    cancel = await post(
        client, alice, f"{path}/cancel", verb_env(alice, bob, request, "cancel", {})
    )
    assert cancel.status_code == 409
    assert cancel.json()["code"] == "AB-6003"

    listed = await client.get("/v1/tasks", params={"role": "recipient"}, headers=bob.headers())
    assert [t["id"] for t in listed.json()["items"]] == [task_id]
    assert (
        await client.get("/v1/tasks", params={"role": "requester"}, headers=bob.headers())
    ).json()["items"] == []


async def test_repeated_request_returns_the_same_task(
    gateway_client: httpx.AsyncClient, pair: tuple[World, SimAgent, SimAgent]
) -> None:
    client, (_world, alice, bob) = gateway_client, pair
    first = request_env(alice, bob, "same-key")
    assert (await post(client, alice, "/v1/tasks", first)).status_code == 202
    again = request_env(alice, bob, "same-key")  # a new message id, the same request
    repeat = await post(client, alice, "/v1/tasks", again)
    assert repeat.status_code == 200, repeat.text
    assert repeat.headers["Idempotent-Replayed"] == "true"
    body = repeat.json()
    assert body["task"]["id"] == first["subject"]
    assert body["duplicate_of"] == first["id"]
    assert body["receipt"]["msg_id"] == first["id"]
    # The repeat was neither stored nor delivered.
    reply = await client.get(f"/v1/messages/{again['id']}", headers=alice.headers())
    assert reply.status_code == 404
    polled = await client.get("/v1/inbox", params={"wait_s": 2}, headers=bob.headers())
    assert [d["msg_id"] for d in polled.json()["deliveries"]] == [first["id"]]

    other = request_env(alice, bob, "same-key", {"instructions": "something else"})
    conflict = await post(client, alice, "/v1/tasks", other)
    assert conflict.status_code == 409
    assert conflict.json()["code"] == "AB-6002"
    assert conflict.json()["task_id"] == first["subject"]


async def test_parties_states_and_capabilities_are_enforced(
    gateway_client: httpx.AsyncClient, pair: tuple[World, SimAgent, SimAgent]
) -> None:
    client, (world, alice, bob) = gateway_client, pair
    request = request_env(alice, bob, "rules")
    assert (await post(client, alice, "/v1/tasks", request)).status_code == 202
    path = f"/v1/tasks/{request['subject']}"

    # The requester may not accept its own request; the recipient may not cancel it.
    wrong = await post(client, alice, f"{path}/accept", verb_env(alice, bob, request, "accept", {}))
    assert (wrong.status_code, wrong.json()["code"]) == (403, "AB-6005")
    wrong = await post(client, bob, f"{path}/cancel", verb_env(bob, alice, request, "cancel", {}))
    assert (wrong.status_code, wrong.json()["code"]) == (403, "AB-6005")
    # Completing a task never accepted is not a move of the table.
    early = verb_env(bob, alice, request, "complete", {"summary": "done?"})
    invalid = await post(client, bob, f"{path}/complete", early)
    assert (invalid.status_code, invalid.json()["code"]) == (409, "AB-6004")
    # A third agent of the tenant sees no task there.
    carol = await enroll(client, world, "carol")
    assert (await client.get(path, headers=carol.headers())).json()["code"] == "AB-6001"
    # The route's type and subject must match.
    mismatch = await post(
        client, bob, f"{path}/reject", verb_env(bob, alice, request, "accept", {})
    )
    assert mismatch.json()["code"] == "AB-2003"

    cancel = await post(
        client,
        alice,
        f"{path}/cancel",
        verb_env(alice, bob, request, "cancel", {"reason": "not needed"}),
    )
    assert cancel.json()["task"]["state"] == "cancelled"
    trail = (await client.get(f"{path}/transitions", headers=bob.headers())).json()
    assert (trail[-1]["to_state"], trail[-1]["reason"]) == ("cancelled", "not needed")

    unknown = request_env(alice, bob, "cap")
    unknown["capability"] = "code.write"
    assert (await post(client, alice, "/v1/tasks", unknown)).json()["code"] == "AB-6006"
    version = request_env(alice, bob, "ver")
    version["capabilityver"] = "2"
    assert (await post(client, alice, "/v1/tasks", version)).json()["code"] == "AB-6007"
    past = request_env(
        alice, bob, "late", {"instructions": "x", "deadline": "2020-01-01T00:00:00.000Z"}
    )
    assert (await post(client, alice, "/v1/tasks", past)).json()["code"] == "AB-6008"


async def test_task_types_also_go_through_post_messages(
    gateway_client: httpx.AsyncClient, pair: tuple[World, SimAgent, SimAgent]
) -> None:
    """The delivery lifespan installs the task rules on the generic send route too."""
    client, (_world, alice, bob) = gateway_client, pair
    request = request_env(alice, bob, "via-messages")
    sent = await post(client, alice, "/v1/messages", request)
    assert sent.status_code == 202, sent.text
    assert sent.json()["task"] == {"id": request["subject"], "state": "submitted"}
    accept = verb_env(bob, alice, request, "accept", {"note": "on it"})
    accepted = await post(client, bob, "/v1/messages", accept)
    assert accepted.json()["task"]["state"] == "accepted"
    # A replay of the same accept answers the task as it is now, without a second move.
    replay = await post(client, bob, f"/v1/tasks/{request['subject']}/accept", accept)
    assert replay.status_code == 200, replay.text
    assert replay.json()["task"] == {"id": request["subject"], "state": "accepted"}
