"""Usage uploads through the app on real PostgreSQL and NATS (04-API-SPEC §9): a batch sent twice
is stored once; each record's cost is computed from ``model_pricing`` with its source and
confidence; a task whose reported spend passes its budget is stopped (``cancelled``, AB-6012)
with ``task.budget_exceeded`` in its trace; hostile records are refused alone."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
from agentbus.db import SCOPE
from agentbus.gateway.context import Gateway
from agentbus.gateway.domain.wire import format_ts
from agentbus.gateway.testkit import SimAgent, World, alice_and_bob, post_signed
from agentbus.ids import format_id
from platformkit.db.scope import tenant_transaction
from platformkit.ids import uuid7

Json = dict[str, Any]
SCHEMA = "https://agentbus.exchange/schemas/"
DEEP = b'{"records": [' + b"[" * 100_000 + b"]" * 100_000 + b"]}"


def record(**fields: Any) -> Json:
    return {
        "id": format_id("usg", uuid7()),
        "recorded_at": format_ts(datetime.now(UTC)),
        "harness": "claude",
        "provider": "anthropic",
        "model": "claude-sonnet-4-5-20250929",
        "input_tokens": 1200,
        "output_tokens": 340,
        **fields,
    }


async def upload(client: httpx.AsyncClient, agent: SimAgent, records: list[Json]) -> httpx.Response:
    return await client.post("/v1/usage", json={"records": records}, headers=agent.headers())


async def stored(gw: Gateway, world: World, usage_id: str) -> list[Json]:
    async with tenant_transaction(gw.pool, SCOPE, world.tenant_id) as conn:
        cur = await conn.execute(
            "SELECT * FROM usage WHERE tenant_id = %s AND usage_id = %s",
            (world.tenant_id, uuid.UUID(usage_id.removeprefix("usg_"))),
        )
        return await cur.fetchall()


@pytest.fixture
async def pair(
    gateway: Gateway, gateway_client: httpx.AsyncClient
) -> tuple[World, SimAgent, SimAgent]:
    return await alice_and_bob(gateway, gateway_client)


async def test_a_batch_sent_twice_is_stored_once(
    gateway: Gateway, gateway_client: httpx.AsyncClient, pair: tuple[World, SimAgent, SimAgent]
) -> None:
    world, alice, _bob = pair
    batch = [record(), record(model="gpt-5-codex", provider="openai", harness="codex")]
    first = await upload(gateway_client, alice, batch)
    assert first.status_code == 202, first.text
    assert first.json() == {"accepted": 2, "duplicates": 0, "refused": []}
    again = await upload(gateway_client, alice, batch)
    assert again.status_code == 202, again.text
    assert again.json() == {"accepted": 0, "duplicates": 2, "refused": []}
    for rec in batch:
        [row] = await stored(gateway, world, rec["id"])
        assert row["agent_id"] == uuid.UUID(alice.agent_id.removeprefix("agt_"))


async def test_cost_is_computed_with_its_source_and_confidence(
    gateway: Gateway, gateway_client: httpx.AsyncClient, pair: tuple[World, SimAgent, SimAgent]
) -> None:
    world, alice, _bob = pair
    million = 1_000_000
    cases = {
        # $3 input, $15 output, $0.30 cache read, $3.75 cache write per million (Sonnet 4.5)
        "computed": (record(input_tokens=million, output_tokens=million // 10,
                            cache_read_tokens=2 * million, cache_write_tokens=million // 2),
                     ("6.975000", "computed", "exact")),
        "reported": (record(cost_usd="0.0123", cost_source="harness_reported"),
                     ("0.012300", "harness_reported", "exact")),
        "by-agent": (record(reported_by="agent"), ("0.008700", "computed", "unverified")),
        "lowered": (record(confidence="approximate"), ("0.008700", "computed", "approximate")),
        "unpriced": (record(provider="other", model="local-llama", cost_usd="0.5"),
                     ("0.500000", "estimate", "unverified")),
        "gemini": (record(provider="google", model="models/gemini-2.5-pro", harness="gemini",
                          input_tokens=million, output_tokens=million),
                   ("11.250000", "computed", "exact")),
    }  # fmt: skip
    reply = await upload(gateway_client, alice, [rec for rec, _ in cases.values()])
    assert reply.json()["accepted"] == len(cases), reply.text
    for name, (rec, (cost, source, confidence)) in cases.items():
        [row] = await stored(gateway, world, rec["id"])
        got = (str(row["cost_usd"]), row["cost_source"], row["confidence"])
        assert got == (cost, source, confidence), name


def verb(sender: SimAgent, to: SimAgent, request: Json, name: str, data: Json) -> Json:
    kind = f"agentbus.task.{name}.v1"
    env = sender.envelope(to.address, data)
    env.update(type=kind, dataschema=f"{SCHEMA}{kind}.json", subject=request["subject"],
               correlation=request["id"], conversation=request["conversation"])  # fmt: skip
    return env


async def test_a_task_past_its_budget_is_stopped(
    gateway_client: httpx.AsyncClient, pair: tuple[World, SimAgent, SimAgent]
) -> None:
    client, (_world, alice, bob) = gateway_client, pair
    data = {"instructions": "review", "budget": {"currency": "USD", "max": "1.00"}}
    request = alice.task_request(bob.address, "budget-1", data)
    task_id = request["subject"]
    assert (await post_signed(client, alice, request, "/v1/tasks")).status_code == 202
    accept = verb(bob, alice, request, "accept", {})
    reply = await post_signed(client, bob, accept, f"/v1/tasks/{task_id}/accept")
    assert reply.status_code == 202, reply.text

    turn = {"task_id": task_id, "cost_usd": "0.71", "cost_source": "harness_reported"}
    first = await upload(client, bob, [record(**turn)])
    assert first.json()["accepted"] == 1, first.text
    task = (await client.get(f"/v1/tasks/{task_id}", headers=alice.headers())).json()
    assert (task["state"], task["spent"]) == ("accepted", "0.710000")

    second = await upload(client, bob, [record(**turn)])  # 1.42 USD against 1.00
    assert second.json()["accepted"] == 1, second.text
    task = (await client.get(f"/v1/tasks/{task_id}", headers=alice.headers())).json()
    assert (task["state"], task["spent"], task["error_code"]) == (
        "cancelled", "1.420000", "AB-6012",
    )  # fmt: skip
    trail = (await client.get(f"/v1/tasks/{task_id}/transitions", headers=bob.headers())).json()
    assert trail[-1]["to_state"] == "cancelled"
    assert trail[-1]["reason"] == "budget_exceeded: spent 1.420000 of 1.00 USD"

    trace = await client.get(f"/v1/messages/{request['id']}/trace", headers=alice.headers())
    events = [e["event"] for e in trace.json()["events"]]
    assert events[-2:] == ["task.budget_exceeded", "task.state_changed"], events

    # The recipient is stopped: its next verb is refused, a late upload is still recorded.
    progress = verb(bob, alice, request, "progress", {"percent": 90})
    refused = await post_signed(client, bob, progress, f"/v1/tasks/{task_id}/progress")
    assert refused.status_code == 409
    assert refused.json()["code"] == "AB-6003"
    late = await upload(client, bob, [record(**turn)])
    assert late.json()["accepted"] == 1
    task = (await client.get(f"/v1/tasks/{task_id}", headers=alice.headers())).json()
    assert (task["state"], task["spent"]) == ("cancelled", "2.130000")


async def test_progress_usage_past_the_budget_stops_the_task(
    gateway_client: httpx.AsyncClient, pair: tuple[World, SimAgent, SimAgent]
) -> None:
    client, (_world, alice, bob) = gateway_client, pair
    data = {"instructions": "review", "budget": {"currency": "USD", "max": "1.00"}}
    request = alice.task_request(bob.address, "budget-2", data)
    task_id = request["subject"]
    assert (await post_signed(client, alice, request, "/v1/tasks")).status_code == 202
    accept = verb(bob, alice, request, "accept", {})
    assert (await post_signed(client, bob, accept, f"/v1/tasks/{task_id}/accept")).is_success
    progress = verb(bob, alice, request, "progress", {"usage": {"cost_usd": "1.42"}})
    reply = await post_signed(client, bob, progress, f"/v1/tasks/{task_id}/progress")
    assert reply.status_code == 202, reply.text
    assert reply.json()["task"]["state"] == "cancelled"
    trail = (await client.get(f"/v1/tasks/{task_id}/transitions", headers=bob.headers())).json()
    assert [t["to_state"] for t in trail[-2:]] == ["in_progress", "cancelled"]
    assert trail[-1]["reason"].startswith("budget_exceeded")


async def test_hostile_records_are_refused_alone(
    gateway: Gateway, gateway_client: httpx.AsyncClient, pair: tuple[World, SimAgent, SimAgent]
) -> None:
    world, alice, _bob = pair
    hostile = {
        "nul": record(model="claude\u0000"),
        "huge": record(input_tokens=2**70),
        "past-bigint": record(output_tokens=2**63),
        "negative": record(input_tokens=-1),
        "bool": record(input_tokens=True),
        "surrogate": None,  # written by hand below: json.dumps cannot make one
        "bad-id": record(id="usg_nothex"),
        "future": record(recorded_at="2999-01-01T00:00:00.000Z"),
        "unknown-member": record(extra=1),
        "big-details": record(details={"x": "y" * 5000}),
        "not-a-party": record(task_id=format_id("tsk", uuid7())),
        "cost-too-large": record(cost_usd="123456789.5"),
    }
    good = record()
    texts = [json.dumps(r) for r in hostile.values() if r is not None]
    texts.append(json.dumps(record(model="PLACEHOLDER")).replace("PLACEHOLDER", "\\ud800"))
    body = '{"records": [' + ", ".join([*texts, json.dumps(good)]) + "]}"
    headers = {**alice.headers(), "Content-Type": "application/json"}
    reply = await gateway_client.post("/v1/usage", content=body.encode(), headers=headers)
    assert reply.status_code == 202, reply.text
    answer = reply.json()
    assert answer["accepted"] == 1
    assert [r["index"] for r in answer["refused"]] == list(range(len(texts)))
    codes = {r["problem"]["code"] for r in answer["refused"]}
    assert codes == {"AB-8001", "AB-6001"}, answer["refused"]
    assert all(400 <= r["status"] < 500 for r in answer["refused"])
    assert len(await stored(gateway, world, good["id"])) == 1

    # Alone, a hostile record fails the request with its problem; nothing is stored.
    alone = await upload(gateway_client, alice, [hostile["huge"]])
    assert alone.status_code == 422
    assert alone.json()["code"] == "AB-8001"
    assert alone.json()["refused"][0]["problem"]["field"] == "input_tokens"

    # The request itself: deep nesting, a huge body, the wrong shape, too many records.
    for name, raw in {
        "deep": DEEP,
        "huge": b'{"records": [{"model": "' + b"x" * (2 * 1024 * 1024) + b'"}]}',
        "shape": b'{"records": {}}',
        "empty": b'{"records": []}',
        "not-json": b"\x00\xff",
        "many": json.dumps({"records": [record() for _ in range(501)]}).encode(),
    }.items():
        reply = await gateway_client.post("/v1/usage", content=raw, headers=headers)
        assert 400 <= reply.status_code < 500, (name, reply.status_code, reply.text)
        assert reply.json()["code"] in {"AB-8001", "AB-5002", "AB-5009"}, (name, reply.text)

    unauth = await gateway_client.post("/v1/usage", json={"records": [record()]})
    assert unauth.status_code == 401
