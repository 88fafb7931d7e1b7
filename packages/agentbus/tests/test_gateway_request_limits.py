"""The request rates of 04-API-SPEC §1.6 on the in-process gateway: every answer says what is
left of the bucket it took from (``RateLimit-*``); a caller past its bucket gets AB-5008 with
``Retry-After``, and only that caller; sends say what is left of the sender's own bucket; a
delivery WebSocket past the agent's bucket closes 4429. Bursts are made small here
(``RULES``) so that a few requests use them up, and the buckets' clock stands still unless a
test moves it, so that no token comes back while a slow machine runs the requests."""

from __future__ import annotations

import uuid

import httpx
import pytest
from agentbus.gateway.api import request_limits
from agentbus.gateway.api.request_limits import Kind, RequestLimits
from agentbus.gateway.context import Gateway
from agentbus.gateway.testkit import (
    Closed,
    SimAgent,
    Socket,
    World,
    enroll,
    make_world,
    post_signed,
)
from fastapi import FastAPI


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(gateway: Gateway, monkeypatch: pytest.MonkeyPatch) -> Clock:
    frozen = Clock()
    monkeypatch.setattr(gateway.request_limits, "clock", frozen)
    return frozen


@pytest.fixture
async def world(gateway: Gateway) -> World:
    return await make_world(gateway, "acme")


def _bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def _quota(reply: httpx.Response) -> tuple[int, int, int]:
    headers = reply.headers
    return (
        int(headers["ratelimit-limit"]),
        int(headers["ratelimit-remaining"]),
        int(headers["ratelimit-reset"]),
    )


async def test_agent_requests_count_against_the_agents_bucket(
    gateway_client: httpx.AsyncClient, world: World, clock: Clock
) -> None:
    bob = await enroll(gateway_client, world, "bob")
    first = await gateway_client.get("/v1/inbox", params={"wait_s": 0}, headers=bob.headers())
    second = await gateway_client.get("/v1/conversations", headers=bob.headers())
    assert first.status_code == second.status_code == 200
    limit, left, reset = _quota(first)
    assert (limit, left) == (3000, 2999)
    assert reset >= 1
    assert _quota(second)[1] == 2998


async def test_a_token_past_its_burst_gets_ab_5008_and_another_token_does_not(
    gateway: Gateway,
    gateway_client: httpx.AsyncClient,
    world: World,
    monkeypatch: pytest.MonkeyPatch,
    clock: Clock,
) -> None:
    monkeypatch.setitem(request_limits.RULES, Kind.MANAGEMENT, (600, 3))
    other = await make_world(gateway, "globex")
    answers = [
        await gateway_client.get("/v1/workspaces", headers=_bearer(world.token)) for _ in range(4)
    ]
    assert [a.status_code for a in answers] == [200, 200, 200, 429]
    assert [_quota(a)[:2] for a in answers[:3]] == [(3, 2), (3, 1), (3, 0)]
    refused = answers[3]
    problem = refused.json()
    assert (problem["code"], problem["name"]) == ("AB-5008", "api_rate_limited")
    assert refused.headers["content-type"].startswith("application/problem+json")
    assert int(refused.headers["retry-after"]) >= 1
    assert 0 < problem["retry_after_ms"] <= 1000  # 600 a minute: one token every 100 ms
    assert _quota(refused)[:2] == (3, 0)
    elsewhere = await gateway_client.get("/v1/workspaces", headers=_bearer(other.token))
    assert elsewhere.status_code == 200
    clock.now += problem["retry_after_ms"] / 1000
    again = await gateway_client.get("/v1/workspaces", headers=_bearer(world.token))
    assert again.status_code == 200


async def test_registration_and_credentials_have_buckets_of_their_own(
    gateway_client: httpx.AsyncClient, world: World, monkeypatch: pytest.MonkeyPatch, clock: Clock
) -> None:
    monkeypatch.setitem(request_limits.RULES, Kind.REGISTRATION, (60, 2))
    monkeypatch.setitem(request_limits.RULES, Kind.CREDENTIALS, (30, 3))
    alice = await enroll(gateway_client, world, "alice")  # a registration and an issue
    token = _bearer(world.token)

    async def issue() -> httpx.Response:
        proof = alice.proof(alice.agent_id, alice.key_id)
        path = f"/v1/agents/{alice.agent_id}/credentials"
        return await gateway_client.post(path, json={"proof": proof}, headers=token)

    issued = await issue()
    assert issued.status_code == 200, issued.text
    assert _quota(issued)[:2] == (3, 1)
    refreshed = await gateway_client.post(
        "/v1/credentials/refresh",
        json={"proof": alice.proof(alice.agent_id, alice.key_id)},
        headers=_bearer(issued.json()["access_token"]),
    )
    assert refreshed.status_code == 200, refreshed.text
    assert _quota(refreshed)[:2] == (3, 0)  # issue and refresh share the agent's bucket
    assert (await issue()).json()["code"] == "AB-5008"

    bob = SimAgent(f"agent://{world.slug}/{world.workspace}/bob")
    body = {"workspace": world.workspace, "name": "bob", "public_key": bob.public_key,
            "proof": bob.proof(bob.address)}  # fmt: skip
    registered = await gateway_client.post("/v1/agents", json=body, headers=token)
    assert registered.status_code == 201, registered.text
    assert _quota(registered)[:2] == (2, 0)
    carol = SimAgent(f"agent://{world.slug}/{world.workspace}/carol")
    body |= {"name": "carol", "public_key": carol.public_key, "proof": carol.proof(carol.address)}
    assert (await gateway_client.post("/v1/agents", json=body, headers=token)).status_code == 429
    # the token's other requests take from its management bucket, untouched by the above
    assert (await gateway_client.get("/v1/workspaces", headers=token)).status_code == 200


async def test_sends_carry_the_senders_own_bucket(
    gateway_client: httpx.AsyncClient, world: World
) -> None:
    alice = await enroll(gateway_client, world, "alice")
    bob = await enroll(gateway_client, world, "bob")
    sent = await post_signed(gateway_client, alice, alice.envelope(bob.address, {"text": "hi"}))
    assert sent.status_code == 202, sent.text
    limit, left, _reset = _quota(sent)
    assert limit > 0
    assert left == limit - 1  # the plan's publish_per_minute, one send taken


async def test_a_delivery_websocket_past_the_agents_bucket_closes_4429(
    gateway_app: FastAPI,
    gateway_client: httpx.AsyncClient,
    world: World,
    monkeypatch: pytest.MonkeyPatch,
    clock: Clock,
) -> None:
    monkeypatch.setitem(request_limits.RULES, Kind.AGENT, (3000, 1))
    bob = await enroll(gateway_client, world, "bob")
    polled = await gateway_client.get("/v1/inbox", params={"wait_s": 0}, headers=bob.headers())
    assert polled.status_code == 200
    ws = Socket(gateway_app, bob.credential)
    await ws.connect()
    with pytest.raises(Closed) as closed:
        await ws.receive()
    assert closed.value.code == 4429
    await ws.close()


def test_idle_buckets_are_forgotten_when_there_are_too_many(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(request_limits, "MAX_KEYS", 3)
    now = [0.0]
    buckets = RequestLimits(clock=lambda: now[0])
    busy, idle = uuid.uuid4(), [uuid.uuid4(), uuid.uuid4()]
    for _ in range(50):
        buckets.take(Kind.REGISTRATION, busy)
    for key in idle:
        buckets.take(Kind.REGISTRATION, key)
    now[0] = 5.0  # the idle ones are full again after a second; busy is not
    buckets.take(Kind.REGISTRATION, uuid.uuid4())
    assert (Kind.REGISTRATION, busy) in buckets.buckets
    assert all((Kind.REGISTRATION, key) not in buckets.buckets for key in idle)
    assert buckets.take(Kind.REGISTRATION, busy).remaining == 60 - 50 + 5 - 1  # kept, refilled


def test_off_refuses_nothing_and_says_nothing() -> None:
    buckets = RequestLimits(clock=lambda: 0.0, enforce=False)
    assert all(buckets.take(Kind.CREDENTIALS, uuid.uuid4()) is None for _ in range(100))
    assert buckets.buckets == {}
