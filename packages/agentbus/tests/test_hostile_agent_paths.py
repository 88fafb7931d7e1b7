"""Hostile input on the agent-facing paths, in process against the real gateway: NUL, lone
surrogates, 2**70, JSON nested 100,000 deep, oversize bodies and frames. Each bad request or item
is refused with its AB- code (never a 5xx), and what comes after it arrives: the next send, the
other items of a batch, the next frames of the delivery WebSocket; nothing is lost."""

from __future__ import annotations

import json
from typing import Any

import httpx
from agentbus.delivery.ws import FRAME_MAX
from agentbus.gateway.domain.envelope import SEND_BODY_MAX
from agentbus.gateway.testkit import (
    SimAgent,
    Socket,
    World,
    poll_inbox,
    post_envelope,
)
from fastapi import FastAPI
from wirekit import canonical_json

Json = dict[str, Any]
DEEP = b"[" * 100_000 + b"]" * 100_000
NUL, SURROGATE, HUGE = "\u0000", "\\ud800", 2**70


def signed_text(sender: SimAgent, env: Json) -> str:
    return canonical_json(sender.sign(env)).decode()


def hostile_envelopes(alice: SimAgent, to: str) -> dict[str, str]:
    """Envelope texts a sender may post, each bad in one way."""
    with_nul = signed_text(alice, alice.envelope(to + NUL, {"text": "x"}))
    surrogate = signed_text(alice, alice.envelope(to, {"text": "PLACEHOLDER"}))
    return {
        "nul-attribute": with_nul,
        "lone-surrogate": surrogate.replace("PLACEHOLDER", SURROGATE),
        "huge-integer": signed_text(
            alice, alice.envelope(to, {"text": "x", "metadata": {"n": HUGE}})
        ),
        "not-an-envelope": '{"hello": "world"}',
        "bad-signature": json.dumps(
            {**alice.sign(alice.envelope(to, {"text": "x"})), "signature": "A" * 86}
        ),
    }


async def test_hostile_sends_are_refused_and_the_next_send_lands(
    gateway_client: httpx.AsyncClient, acme_agents: tuple[World, SimAgent, SimAgent]
) -> None:
    _world, alice, bob = acme_agents
    headers = {**alice.headers(), "Content-Type": "application/cloudevents+json"}
    bodies = {
        **{k: v.encode() for k, v in hostile_envelopes(alice, bob.address).items()},
        "deep": DEEP,
        "oversize": b'{"a": "' + b"x" * (SEND_BODY_MAX + 1) + b'"}',
    }
    for name, body in bodies.items():
        reply = await gateway_client.post("/v1/messages", content=body, headers=headers)
        assert 400 <= reply.status_code < 500, (name, reply.status_code, reply.text)
        assert reply.json()["code"].startswith("AB-"), (name, reply.text)

    sent = await post_envelope(gateway_client, alice, alice.envelope(bob.address, {"text": "ok"}))
    inbox = await poll_inbox(gateway_client, bob, wait_s=5)
    assert [d["msg_id"] for d in inbox["deliveries"]] == [sent["message"]["id"]]


async def test_a_batch_refuses_its_bad_items_alone(
    gateway_client: httpx.AsyncClient, acme_agents: tuple[World, SimAgent, SimAgent]
) -> None:
    _world, alice, bob = acme_agents
    bad = hostile_envelopes(alice, bob.address)
    # Each good envelope its own conversation, so no refusal holds a good one's lane.
    good = [
        signed_text(alice, alice.envelope(bob.address, {"text": f"good {i}"})) for i in range(3)
    ]
    items = [good[0], *bad.values(), good[1], good[2]]
    body = '{"envelopes": [' + ", ".join(items) + "]}"
    headers = {**alice.headers(), "Content-Type": "application/json"}

    reply = await gateway_client.post("/v1/messages/batch", content=body, headers=headers)

    assert reply.status_code == 200, reply.text
    results = reply.json()["results"]
    assert [results[0]["status"], results[-2]["status"], results[-1]["status"]] == [202] * 3
    for name, result in zip(bad, results[1:-2], strict=True):
        assert 400 <= result["status"] < 500, (name, result)
        assert result["problem"]["code"].startswith("AB-"), (name, result)
    landed = {json.loads(g)["id"] for g in good}
    inbox = await poll_inbox(gateway_client, bob, wait_s=5)
    assert {d["msg_id"] for d in inbox["deliveries"]} == landed


async def test_a_send_frame_refuses_its_bad_items_alone_and_the_socket_carries_on(
    gateway_app: FastAPI,
    gateway_client: httpx.AsyncClient,
    acme_agents: tuple[World, SimAgent, SimAgent],
) -> None:
    """On the delivery WebSocket as over HTTP: a frame nested 100,000 deep or of 30 MiB is
    refused whole (AB-8001) and nothing of it stored; NUL, a lone surrogate, 2**70 and a bad
    signature in a ``send`` frame fail their envelope alone."""
    _world, alice, bob = acme_agents
    good = signed_text(alice, alice.envelope(bob.address, {"text": "good on the socket"}))
    ws = Socket(gateway_app, alice.credential)
    await ws.connect()
    try:
        assert (await ws.receive())["type"] == "hello"
        deep = '{"type": "send", "id": "deep", "envelopes": ' + DEEP.decode() + "}"
        huge = '{"type": "send", "id": "huge", "envelopes": ["' + "x" * (30 << 20) + '"]}'
        for text in (deep, huge):
            await ws.send_text(text)
            assert (await ws.receive())["problem"]["code"] == "AB-8001"
        items = [*hostile_envelopes(alice, bob.address).values(), good]
        await ws.send_text(
            '{"type": "send", "id": "mixed", "envelopes": [' + ", ".join(items) + "]}"
        )
        results = (await ws.result_for("mixed"))["results"]
        assert results[-1]["status"] == 202
        for result in results[:-1]:
            assert 400 <= result["status"] < 500, result
            assert result["problem"]["code"].startswith("AB-"), result
    finally:
        await ws.close()
    inbox = await poll_inbox(gateway_client, bob, wait_s=5)
    assert [d["msg_id"] for d in inbox["deliveries"]] == [json.loads(good)["id"]]


async def test_hostile_settlements_and_heartbeats_are_refused_and_the_next_ones_work(
    gateway_client: httpx.AsyncClient, acme_agents: tuple[World, SimAgent, SimAgent]
) -> None:
    _world, alice, bob = acme_agents
    sent = await post_envelope(gateway_client, alice, alice.envelope(bob.address, {"text": "ok"}))
    delivery = (await poll_inbox(gateway_client, bob, wait_s=5))["deliveries"][0]
    json_headers = {**bob.headers(), "Content-Type": "application/json"}
    hostile = [
        DEEP,
        b'{"acks": [{"msg_id": "msg_\\u0000", "ack_token": "x"}]}',
        b'{"acks": [{"msg_id": "\\ud800", "ack_token": "\\ud800"}]}',
        json.dumps({"acks": [{"msg_id": sent["message"]["id"], "ack_token": HUGE}]}).encode(),
        b"x" * (1024 * 1024 + 1),
    ]
    for route in ("/v1/inbox/ack", "/v1/inbox/nak", "/v1/inbox/term"):
        for body in hostile:
            reply = await gateway_client.post(route, content=body, headers=json_headers)
            assert 400 <= reply.status_code < 500 or reply.status_code == 200, (route, reply.text)
    heartbeat = f"/v1/agents/{bob.agent_id}/heartbeat"
    for body in [DEEP, b'{"status": "online", "host": "a\\u0000b"}', b'{"status": "\\ud800"}',
                 json.dumps({"status": HUGE}).encode(), b"x" * (1024 * 1024 + 1)]:  # fmt: skip
        reply = await gateway_client.post(heartbeat, content=body, headers=json_headers)
        assert 400 <= reply.status_code < 500, (body[:40], reply.text)

    ack = {"msg_id": delivery["msg_id"], "ack_token": delivery["ack_token"]}
    reply = await gateway_client.post("/v1/inbox/ack", json={"acks": [ack]}, headers=bob.headers())
    assert reply.json()["results"][0]["result"] == "ok", reply.text
    beat = await gateway_client.post(heartbeat, json={"status": "online"}, headers=bob.headers())
    assert beat.status_code == 204, beat.text


async def test_hostile_frames_are_answered_and_the_socket_carries_on(
    gateway_app: FastAPI,
    gateway_client: httpx.AsyncClient,
    acme_agents: tuple[World, SimAgent, SimAgent],
) -> None:
    _world, alice, bob = acme_agents
    ws = Socket(gateway_app, bob.credential)
    await ws.connect()
    try:
        assert (await ws.receive())["type"] == "hello"
        texts = [
            '{"type": "ack", "id": "n", "acks": [{"msg_id": "msg_\\u0000", "ack_token": "x"}]}',
            '{"type": "ack", "id": "s", "acks": [{"msg_id": "\\ud800", "ack_token": "x"}]}',
            json.dumps({"type": "credit", "id": "h", "n": HUGE}),
            DEEP.decode(),
            '{"type": "ping", "id": "' + "x" * FRAME_MAX + '"}',
            "not json",
            '{"type": "\\u0000"}',
        ]
        for text in texts:
            await ws.to_app.put({"type": "websocket.receive", "text": text})
            answer = await ws.receive()
            assert answer["type"] == "result", (text[:60], answer)
            problem = answer.get("problem") or answer["results"][0]
            assert problem.get("code", "AB-8001").startswith("AB-") or "result" in problem, answer
        await ws.to_app.put({"type": "websocket.receive", "bytes": b"\x00\x01"})
        assert (await ws.receive())["problem"]["code"] == "AB-8001"

        await ws.send({"type": "credit", "id": "c1", "n": 1})
        env = alice.envelope(bob.address, {"text": "after the hostile frames"})
        await post_envelope(gateway_client, alice, env)
        delivery = await ws.receive()
        assert (delivery["type"], delivery["msg_id"]) == ("delivery", env["id"])
        await ws.send({"type": "ack", "id": "a1", "acks": [
            {"msg_id": env["id"], "ack_token": delivery["ack_token"]}]})  # fmt: skip
        assert (await ws.receive())["results"][0]["result"] == "ok"
    finally:
        await ws.close()
