"""The delivery WebSocket (04-API-SPEC.md §5.2), driven in-process over ASGI: hello, credit,
delivery, ack and read frames answered by results; a pull's deliveries in one frame under
``agentbus.v2``, one frame each under ``agentbus.v1``; a newer connection replaces the older
(close 4002, and a waiting long-poll answers ``replaced``); a bad credential closes 4401."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest
from agentbus.delivery import settle
from agentbus.gateway.testkit import (
    Closed,
    SimAgent,
    Socket,
    World,
    post_envelope,
)
from agentbus.ids import new_id
from fastapi import FastAPI
from psycopg_pool import PoolTimeout

Json = dict[str, Any]


async def test_credit_delivery_ack_and_read_over_the_socket(
    gateway_app: FastAPI,
    gateway_client: httpx.AsyncClient,
    acme_agents: tuple[World, SimAgent, SimAgent],
) -> None:
    _world, alice, bob = acme_agents
    ws, sender = Socket(gateway_app, bob.credential), Socket(gateway_app, alice.credential)
    await ws.connect()
    await sender.connect()
    assert ws.accepted == "agentbus.v1"
    try:
        assert (await sender.receive())["type"] == "hello"
        hello = await ws.receive()
        assert (hello["type"], hello["ack_wait_ms"], hello["max_deliver"]) == ("hello", 30000, 10)
        await ws.send({"type": "credit", "id": "c1", "n": 1})
        env = alice.envelope(bob.address, {"text": "over the socket"})
        await post_envelope(gateway_client, alice, env)
        delivery = await ws.receive()
        assert delivery["type"] == "delivery"
        assert delivery["msg_id"] == env["id"]
        assert delivery["envelope"]["data"] == {"text": "over the socket"}

        ack = {"msg_id": env["id"], "ack_token": delivery["ack_token"]}
        await ws.send({"type": "ack", "id": "a1", "acks": [ack]})
        result = await ws.receive()
        assert result == {
            "type": "result",
            "for": "a1",
            "results": [{"msg_id": env["id"], "result": "ok", "status": "delivered"}],
        }
        await ws.send({"type": "read", "id": "r1", "reads": [{"msg_id": env["id"]}]})
        assert (await ws.receive())["results"][0]["status"] == "read"
        # The sender's connection hears what became of its message.
        statuses = [await sender.receive(), await sender.receive()]
        assert [(f["type"], f["msg_id"], f["status"]) for f in statuses] == [
            ("status", env["id"], "delivered"),
            ("status", env["id"], "read"),
        ]
        await ws.send({"type": "ack", "id": "bad", "acks": "nope"})
        assert (await ws.receive())["problem"]["code"] == "AB-8001"
        await ws.send({"type": "ping", "id": "p1"})
        assert await ws.receive() == {"type": "pong", "id": "p1"}
    finally:
        await ws.close()
        await sender.close()


@pytest.mark.parametrize(
    ("offered", "chosen", "frames"),
    [
        (("agentbus.v2", "agentbus.v1"), "agentbus.v2", [("deliveries", 3)]),
        (("agentbus.v1",), "agentbus.v1", [("delivery", 1)] * 3),
    ],
)
async def test_a_pull_comes_in_one_frame_under_v2_and_one_frame_each_under_v1(
    gateway_app: FastAPI,
    gateway_client: httpx.AsyncClient,
    acme_agents: tuple[World, SimAgent, SimAgent],
    offered: tuple[str, ...],
    chosen: str,
    frames: list[tuple[str, int]],
) -> None:
    _world, alice, bob = acme_agents
    envs = [alice.envelope(bob.address, {"text": f"waiting {n}"}) for n in range(3)]
    for env in envs:
        await post_envelope(gateway_client, alice, env)
    ws = Socket(gateway_app, bob.credential, offered)
    await ws.connect()
    try:
        assert ws.accepted == chosen
        assert (await ws.receive())["type"] == "hello"
        await ws.send({"type": "credit", "id": "c1", "n": 10})
        got = [await ws.receive() for _ in frames]
        assert [(f["type"], len(f.get("deliveries", [f]))) for f in got] == frames
        deliveries = got[0]["deliveries"] if chosen == "agentbus.v2" else got
        assert [d["msg_id"] for d in deliveries] == [env["id"] for env in envs]
        assert all(d["envelope"]["data"]["text"].startswith("waiting") for d in deliveries)
        reads = [{"msg_id": d["msg_id"]} for d in deliveries]
        await ws.send({"type": "read", "id": "r1", "reads": reads})
        result = await ws.receive()
        assert [r["status"] for r in result["results"]] == ["read"] * 3
    finally:
        await ws.close()


async def test_a_newer_connection_replaces_the_older(
    gateway_app: FastAPI,
    gateway_client: httpx.AsyncClient,
    acme_agents: tuple[World, SimAgent, SimAgent],
) -> None:
    _world, _alice, bob = acme_agents
    poll = asyncio.create_task(
        gateway_client.get("/v1/inbox", params={"wait_s": 20}, headers=bob.headers())
    )
    await asyncio.sleep(0.5)
    first = Socket(gateway_app, bob.credential)
    await first.connect()
    replaced = await asyncio.wait_for(poll, 10)
    assert replaced.json() == {"deliveries": [], "replaced": True}
    assert (await first.receive())["type"] == "hello"
    second = Socket(gateway_app, bob.credential)
    await second.connect()
    try:
        assert await first.until_closed() == 4002
        assert (await second.receive())["type"] == "hello"
    finally:
        await second.close()
        await first.close()


async def test_a_bad_credential_closes_4401(
    gateway_app: FastAPI, acme_agents: tuple[World, SimAgent, SimAgent]
) -> None:
    ws = Socket(gateway_app, "not-a-credential")
    await ws.connect()
    with pytest.raises(Closed) as closed:
        await ws.receive()
    assert closed.value.code == 4401
    await ws.close()


async def test_a_settle_frame_without_a_database_connection_is_answered_and_socket_kept(
    gateway_app: FastAPI,
    acme_agents: tuple[World, SimAgent, SimAgent],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A settle that gets no pooled connection in time (a busy gateway) is answered AB-9002, as
    its HTTP route would be; the socket, and the next frame, carry on."""
    _world, _alice, bob = acme_agents

    async def no_connection(*_args: Any) -> Json:
        raise PoolTimeout("no connection in time")

    monkeypatch.setattr(settle, "read", no_connection)
    ws = Socket(gateway_app, bob.credential)
    await ws.connect()
    try:
        assert (await ws.receive())["type"] == "hello"
        await ws.send({"type": "read", "id": "r1", "reads": [{"msg_id": new_id("msg")[1]}]})
        answer = await ws.receive()
        assert (answer["for"], answer["problem"]["code"], answer["problem"]["status"]) == (
            "r1", "AB-9002", 503,
        )  # fmt: skip
        monkeypatch.undo()
        await ws.send({"type": "ping", "id": "p1"})
        assert await ws.receive() == {"type": "pong", "id": "p1"}
    finally:
        await ws.close()
