"""``AgentBus-Trace-Id`` on every answer (04-API-SPEC §1.1): a send's names its envelope's
trace, a replay's too; other answers the trace of the caller's ``traceparent``, or a new one
when there is none or it is malformed."""

from __future__ import annotations

import re

import httpx
from agentbus.gateway.context import Gateway
from agentbus.gateway.testkit import TRACEPARENT, enroll, make_world, post_signed

HEX32 = re.compile(r"^[0-9a-f]{32}$")
CALLER = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


async def test_answers_carry_the_callers_trace_or_a_new_one(
    gateway: Gateway, gateway_client: httpx.AsyncClient
) -> None:
    world = await make_world(gateway, "acme")
    token = {"Authorization": f"Bearer {world.token}"}
    traced = await gateway_client.get("/v1/workspaces", headers=token | {"traceparent": CALLER})
    assert traced.headers["agentbus-trace-id"] == "0af7651916cd43dd8448eb211c80319c"
    fresh = [
        (await gateway_client.get("/v1/workspaces", headers=token | extra)).headers
        for extra in ({}, {"traceparent": "00-" + "0" * 32 + "-00f067aa0ba902b7-01"})
    ]
    ids = [headers["agentbus-trace-id"] for headers in fresh]
    assert all(HEX32.match(trace) for trace in ids)
    assert len({*ids, "0" * 32}) == 3  # new ones, each its own
    refused = await gateway_client.get("/v1/workspaces", headers={"traceparent": CALLER})
    assert refused.status_code == 401
    assert refused.headers["agentbus-trace-id"] == "0af7651916cd43dd8448eb211c80319c"
    assert HEX32.match((await gateway_client.get("/healthz")).headers["agentbus-trace-id"])


async def test_a_send_and_its_replay_name_the_envelopes_trace(
    gateway: Gateway, gateway_client: httpx.AsyncClient
) -> None:
    world = await make_world(gateway, "acme")
    alice, bob = (
        await enroll(gateway_client, world, "alice"),
        await enroll(gateway_client, world, "bob"),
    )
    env = alice.envelope(bob.address, {"text": "traced"})
    envelope_trace = TRACEPARENT.split("-")[1]
    first = await post_signed(gateway_client, alice, env)
    again = await post_signed(gateway_client, alice, env)
    assert (first.status_code, again.status_code) == (202, 200)
    assert first.headers["agentbus-trace-id"] == envelope_trace
    assert again.headers["agentbus-trace-id"] == envelope_trace
    assert again.headers["idempotent-replayed"] == "true"
