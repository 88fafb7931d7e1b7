"""``send`` frames on the delivery WebSocket (04-API-SPEC.md §5.2), in process against the real
gateway, PostgreSQL and NATS: a frame is answered with exactly what ``POST
/v1/messages/batch`` answers (per envelope, in order, a bad envelope refused alone, a lane held
after a refusal, replays idempotent across the two channels), takes from the sender's send
bucket and not from its request bucket, is refused without the ``send`` scope, and a bad or
oversize frame is refused with the socket kept. A send frame runs beside the socket's other
frames, and a failing dependency fails the whole frame."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
import psycopg
import pytest
from agentbus import broker
from agentbus.delivery import send_frames
from agentbus.delivery.ws import FRAME_MAX, SEND_FRAME_MAX
from agentbus.gateway.actions.receipts import verify_receipt
from agentbus.gateway.api.request_limits import Kind
from agentbus.gateway.context import Gateway
from agentbus.gateway.domain.errors import ObjectStoreUnavailable
from agentbus.gateway.testkit import (
    SimAgent,
    Socket,
    World,
    enroll,
    owner_token,
    poll_inbox,
)
from agentbus.ids import format_id, parse_id
from fastapi import FastAPI
from platformkit.ids import uuid7
from psycopg.types.json import Jsonb
from psycopg_pool import PoolTimeout

Json = dict[str, Any]


@pytest.fixture
async def alice_socket(
    gateway_app: FastAPI, acme_agents: tuple[World, SimAgent, SimAgent]
) -> AsyncIterator[Socket]:
    """Alice's delivery WebSocket, past its ``hello``."""
    ws = Socket(gateway_app, acme_agents[1].credential)
    await ws.connect()
    try:
        assert (await ws.receive())["type"] == "hello"
        yield ws
    finally:
        await ws.close()


async def send_frame(ws: Socket, frame_id: str, envelopes: list[Any]) -> Json:
    await ws.send({"type": "send", "id": frame_id, "envelopes": envelopes})
    return await ws.result_for(frame_id)


async def stored(url: str, ids: list[str]) -> dict[str, int]:
    """How many ``messages`` rows each id has."""
    async with await psycopg.AsyncConnection.connect(url) as conn:
        rows = await (
            await conn.execute(
                "SELECT id, count(*) FROM messages WHERE id = ANY(%s) GROUP BY id",
                ([uuid.UUID(hex=i.removeprefix("msg_")) for i in ids],),
            )
        ).fetchall()
    return {format_id("msg", row[0]): row[1] for row in rows}


async def in_stream(gw: Gateway, world: World) -> int:
    info = await gw.broker.js.stream_info(broker.stream_name(world.tenant_id))
    return int(info.state.messages)


async def test_the_hello_lists_send_among_the_frames_it_takes(
    gateway_app: FastAPI, acme_agents: tuple[World, SimAgent, SimAgent]
) -> None:
    ws = Socket(gateway_app, acme_agents[1].credential)
    await ws.connect()
    try:
        hello = await ws.receive()
        assert hello["type"] == "hello"
        assert hello["frames"] == [
            "credit", "ack", "nak", "term", "read", "send", "auth", "ping", "pong",
        ]  # fmt: skip
    finally:
        await ws.close()


async def test_a_send_frame_is_answered_per_envelope_as_the_batch_route(
    gateway: Gateway,
    gateway_client: httpx.AsyncClient,
    acme_agents: tuple[World, SimAgent, SimAgent],
    alice_socket: Socket,
    agentbus_db: str,
) -> None:
    world, alice, bob = acme_agents
    carol = await enroll(gateway_client, world, "carol")
    lane = format_id("cnv", uuid7())
    to_bob = [
        alice.sign(alice.envelope(bob.address, {"text": f"m{n}"}, conversation=lane))
        for n in range(4)
    ]
    tampered = dict(to_bob[1], data={"text": "changed after signing"})
    to_carol = alice.sign(alice.envelope(carol.address, {"text": "another lane"}))
    frame = [to_bob[0], tampered, to_carol, to_bob[2], "not an envelope", to_bob[3]]

    answer = await send_frame(alice_socket, "s1", frame)

    assert set(answer) == {"type", "for", "results"}
    results = answer["results"]
    assert [r["status"] for r in results] == [202, 422, 202, 409, 400, 409]
    codes = [r.get("problem", {}).get("code") for r in results]
    assert codes == [None, "AB-2011", None, "AB-2021", "AB-2001", "AB-2021"]
    assert results[1]["problem"]["instance"] == "/v1/inbox/ws"
    for result, env in zip((results[0], results[2]), (to_bob[0], to_carol), strict=True):
        assert result["message"]["id"] == env["id"]
        assert verify_receipt(gateway.signing, result["receipt"])
        assert isinstance(result["receipt"]["seq"], int)
    # the refused envelope and the lane it held stored nothing; the rest is delivered
    ids = [e["id"] for e in (to_bob[0], tampered, to_carol, to_bob[2], to_bob[3])]
    assert await stored(agentbus_db, ids) == {to_bob[0]["id"]: 1, to_carol["id"]: 1}
    assert await in_stream(gateway, world) == 2
    pulled = await poll_inbox(gateway_client, bob, wait_s=5)
    assert [d["msg_id"] for d in pulled["deliveries"]] == [to_bob[0]["id"]]
    # the held ones go through once sent again, over HTTP this time
    again = await gateway_client.post(
        "/v1/messages/batch",
        content=json.dumps({"envelopes": [to_bob[2], to_bob[3]]}).encode(),
        headers={**alice.headers(), "Content-Type": "application/json"},
    )
    assert [r["status"] for r in again.json()["results"]] == [202, 202]


async def test_a_send_frame_replays_what_either_channel_accepted(
    gateway: Gateway,
    gateway_client: httpx.AsyncClient,
    acme_agents: tuple[World, SimAgent, SimAgent],
    alice_socket: Socket,
    agentbus_db: str,
) -> None:
    world, alice, bob = acme_agents
    envs = [alice.sign(alice.envelope(bob.address, {"text": f"once {n}"})) for n in range(3)]
    over_http = await gateway_client.post(
        "/v1/messages/batch",
        content=json.dumps({"envelopes": envs[:1]}).encode(),
        headers={**alice.headers(), "Content-Type": "application/json"},
    )
    assert over_http.json()["results"][0]["status"] == 202

    first = await send_frame(alice_socket, "same", envs)
    second = await send_frame(alice_socket, "same", envs)

    assert [r["status"] for r in first["results"]] == [200, 202, 202]
    assert first["results"][0]["receipt"] == over_http.json()["results"][0]["receipt"]
    assert [r["status"] for r in second["results"]] == [200, 200, 200]
    assert all(r["replayed"] is True for r in second["results"])
    assert [r["receipt"] for r in second["results"][1:]] == [
        r["receipt"] for r in first["results"][1:]
    ]
    assert await stored(agentbus_db, [e["id"] for e in envs]) == {e["id"]: 1 for e in envs}
    assert await in_stream(gateway, world) == 3


async def test_a_send_frame_takes_from_the_send_bucket_not_the_request_bucket(
    gateway: Gateway,
    gateway_app: FastAPI,
    acme_agents: tuple[World, SimAgent, SimAgent],
    agentbus_db: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    world, alice, bob = acme_agents
    async with await psycopg.AsyncConnection.connect(agentbus_db) as conn:
        await conn.execute(
            "UPDATE subscriptions SET overrides = %s WHERE tenant_id = %s",
            (Jsonb({"publish_per_minute": 2}), world.tenant_id),
        )
    monkeypatch.setattr(gateway.request_limits, "clock", lambda: 1000.0)
    ws = Socket(gateway_app, alice.credential)
    await ws.connect()
    try:
        assert (await ws.receive())["type"] == "hello"
        requests = (Kind.AGENT, parse_id("agt", alice.agent_id))
        before = gateway.request_limits.buckets[requests].tokens
        envs = [alice.sign(alice.envelope(bob.address, {"text": f"r{n}"})) for n in range(3)]
        answer = await send_frame(ws, "s1", envs)
        results = answer["results"]
        assert [r["status"] for r in results] == [202, 202, 429]
        assert results[2]["problem"]["code"] == "AB-5003"
        assert results[2]["problem"]["retry_after_ms"] > 0
        again = await send_frame(ws, "s2", envs[:1])  # a replay takes no token
        assert again["results"][0]["status"] == 200
        assert gateway.request_limits.buckets[requests].tokens == before
    finally:
        await ws.close()


async def test_without_the_send_scope_a_send_frame_is_refused_and_the_socket_stays(
    gateway: Gateway,
    gateway_app: FastAPI,
    gateway_client: httpx.AsyncClient,
    acme_agents: tuple[World, SimAgent, SimAgent],
) -> None:
    world, alice, bob = acme_agents
    receive_only = await owner_token(gateway, world, ["receive"])
    issued = await gateway_client.post(
        f"/v1/agents/{bob.agent_id}/credentials",
        json={"proof": bob.proof(bob.agent_id, bob.key_id)},
        headers=receive_only,
    )
    assert issued.status_code == 200, issued.text
    ws = Socket(gateway_app, issued.json()["access_token"])
    await ws.connect()
    try:
        assert (await ws.receive())["type"] == "hello"
        env = bob.sign(bob.envelope(alice.address, {"text": "not allowed"}))
        over_http = await gateway_client.post(
            "/v1/messages/batch",
            content=json.dumps({"envelopes": [env]}).encode(),
            headers={
                "Authorization": f"Bearer {issued.json()['access_token']}",
                "Content-Type": "application/json",
            },
        )
        answer = await send_frame(ws, "s1", [env])
        assert answer["problem"]["code"] == over_http.json()["code"] == "AB-1007"
        assert answer["problem"]["status"] == 403
        # the socket carries on: a delivery still arrives on it
        await ws.send({"type": "credit", "id": "c1", "n": 1})
        to_bob = alice.sign(alice.envelope(bob.address, {"text": "still delivered"}))
        sent = await gateway_client.post(
            "/v1/messages/batch",
            content=json.dumps({"envelopes": [to_bob]}).encode(),
            headers={**alice.headers(), "Content-Type": "application/json"},
        )
        assert sent.json()["results"][0]["status"] == 202
        delivery = await ws.receive()
        assert (delivery["type"], delivery["msg_id"]) == ("delivery", to_bob["id"])
    finally:
        await ws.close()


async def test_bad_and_oversize_send_frames_are_refused_and_the_socket_carries_on(
    gateway: Gateway,
    acme_agents: tuple[World, SimAgent, SimAgent],
    alice_socket: Socket,
) -> None:
    _world, alice, bob = acme_agents
    ws = alice_socket
    env = alice.sign(alice.envelope(bob.address, {"text": "fine"}))
    envelope_text = json.dumps(env)
    refused = {
        # not a frame at all: AB-8001, as any bad frame
        "oversize": (
            '{"type": "send", "id": "x", "envelopes": ["' + "x" * SEND_FRAME_MAX + '"]}',
            "AB-8001",
        ),
        "too deep": ('{"type": "send", "envelopes": [' + "[" * 70 + "]" * 70 + "]}", "AB-8001"),
        "a big frame of another type": (
            '{"type": "ping", "id": "' + "x" * (FRAME_MAX + 1) + '"}',
            "AB-8001",
        ),
        # a frame, but not a batch: what the batch route answers
        "duplicate key": (
            '{"type": "send", "id": "x", "envelopes": ['
            + envelope_text[:-1]
            + ', "source": "agent://acme/main/bob"}]}',
            "AB-2001",
        ),
        "not a list": ('{"type": "send", "id": "x", "envelopes": {}}', "AB-2001"),
        "empty": ('{"type": "send", "id": "x", "envelopes": []}', "AB-2001"),
        "another member": (
            '{"type": "send", "id": "x", "envelopes": [' + envelope_text + '], "extra": 1}',
            "AB-2001",
        ),
        "NaN": ('{"type": "send", "id": "x", "envelopes": [NaN]}', "AB-2001"),
        "too many": (
            json.dumps({"type": "send", "id": "x", "envelopes": [env] * 101}),
            "AB-5009",
        ),
    }
    for what, (text, code) in refused.items():
        await ws.send_text(text)
        answer = await ws.receive()
        assert answer["type"] == "result", what
        assert answer["problem"]["code"] == code, (what, answer)
    # a lone surrogate or a huge integer fails its envelope alone
    surrogate = json.dumps(alice.sign(alice.envelope(bob.address, {"text": "PLACEHOLDER"})))
    huge = alice.sign(alice.envelope(bob.address, {"text": "x", "metadata": {"n": 2**70}}))
    text = (
        '{"type": "send", "id": "alone", "envelopes": ['
        + surrogate.replace("PLACEHOLDER", "\\ud800") + ", " + json.dumps(huge) + ", "
        + envelope_text + "]}"
    )  # fmt: skip
    await ws.send_text(text)
    answer = await ws.result_for("alone")
    assert [r["status"] for r in answer["results"]] == [400, 422, 202]
    assert [r["problem"]["code"] for r in answer["results"][:2]] == ["AB-2001", "AB-2018"]

    # past the settlement frames' bounds, within the batch route's: a send frame of twenty
    # envelopes of 60 KB, data nested 30 deep
    nested: Json = {"leaf": True}
    for _ in range(30):
        nested = {"down": nested}
    text_60k = "y" * 60_000
    big = [
        alice.sign(alice.envelope(bob.address, {"text": text_60k, "metadata": nested}))
        for _ in range(20)
    ]
    frame = json.dumps({"type": "send", "id": "big", "envelopes": big})
    assert FRAME_MAX < len(frame) <= SEND_FRAME_MAX
    await ws.send_text(frame)
    answer = await ws.result_for("big")
    assert [r["status"] for r in answer["results"]] == [202] * 20
    await ws.send({"type": "ping", "id": "after"})
    assert await ws.receive() == {"type": "pong", "id": "after"}


async def test_a_send_frame_runs_beside_the_other_frames(
    acme_agents: tuple[World, SimAgent, SimAgent],
    alice_socket: Socket,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """While a send frame waits on its transaction, the socket answers pings and settle
    frames; the send's answer comes after them, matched by ``for``."""
    _world, alice, bob = acme_agents
    ws, release = alice_socket, asyncio.Event()
    answer_batch = send_frames.answer_batch

    async def slow(*args: Any) -> Json:
        await release.wait()
        return await answer_batch(*args)

    monkeypatch.setattr(send_frames, "answer_batch", slow)
    env = alice.sign(alice.envelope(bob.address, {"text": "slow"}))
    await ws.send({"type": "send", "id": "slow", "envelopes": [env]})
    await ws.send({"type": "ping", "id": "p1"})
    assert await ws.receive() == {"type": "pong", "id": "p1"}
    await ws.send({"type": "read", "id": "r1", "reads": [{"msg_id": env["id"]}]})
    read = await ws.receive()
    assert (read["for"], read["results"][0]["result"]) == ("r1", "invalid")
    release.set()
    sent = await ws.receive()
    assert (sent["for"], sent["results"][0]["status"]) == ("slow", 202)


@pytest.mark.parametrize(
    ("failure", "code", "status"),
    [("object store", "AB-9004", 503), ("database", "AB-9002", 503)],
)
async def test_a_failing_dependency_fails_the_whole_frame(
    gateway: Gateway,
    acme_agents: tuple[World, SimAgent, SimAgent],
    alice_socket: Socket,
    agentbus_db: str,
    monkeypatch: pytest.MonkeyPatch,
    failure: str,
    code: str,
    status: int,
) -> None:
    _world, alice, bob = acme_agents

    async def store_down(_objects: Any) -> None:
        raise ObjectStoreUnavailable("storing failed")

    async def no_connection(*_args: Any) -> Json:
        raise PoolTimeout("no connection in time")

    if failure == "object store":
        monkeypatch.setattr(gateway.objects, "put_many", store_down)
    else:
        monkeypatch.setattr(send_frames, "answer_batch", no_connection)
    envs = [alice.sign(alice.envelope(bob.address, {"text": f"d{n}"})) for n in range(2)]
    answer = await send_frame(alice_socket, "down", envs)
    assert (answer["problem"]["code"], answer["problem"]["status"]) == (code, status)
    assert "results" not in answer
    assert await stored(agentbus_db, [e["id"] for e in envs]) == {}
    monkeypatch.undo()
    again = await send_frame(alice_socket, "up", envs)
    assert [r["status"] for r in again["results"]] == [202, 202]
