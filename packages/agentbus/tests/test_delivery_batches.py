"""Batched settling and the pull's own pending count, on the real app, PostgreSQL and NATS:
acks and reads of a batch are written by one statement (``store.ack_many``) yet answer per item
in the request's order, with the same results as one at a time; a repeated id still sees the
change its first copy made; ``pending_estimate`` comes from the pulled copies' ack subjects."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from agentbus.db import SCOPE
from agentbus.delivery.service import DeliveryService
from agentbus.gateway.context import Gateway
from agentbus.gateway.domain.wire import format_ts
from agentbus.gateway.testkit import (
    SimAgent,
    World,
    enroll,
    make_world,
    send_message,
    settle_inbox,
)
from agentbus.gateway.testkit import poll_inbox as poll
from agentbus.ids import format_id, parse_id
from fastapi import FastAPI
from platformkit.db.scope import tenant_transaction
from platformkit.ids import uuid7

Json = dict[str, Any]


async def send(client: httpx.AsyncClient, sender: SimAgent, to: SimAgent, n: int) -> str:
    return await send_message(client, sender, to, {"text": f"batch {n}"})


async def settle(client: httpx.AsyncClient, agent: SimAgent, verb: str, items: list[Json]) -> Any:
    results = await settle_inbox(client, agent, verb, items)
    return [(r["msg_id"], r["result"], r.get("status")) for r in results]


async def states(gw: Gateway, world: World, ids: list[str]) -> dict[str, Json]:
    async with tenant_transaction(gw.pool, SCOPE, world.tenant_id) as conn:
        cur = await conn.execute(
            """SELECT m.id, m.status::text AS status, m.delivered_at, m.read_at,
                      d.transport_acked_at, d.application_acked_at
                 FROM messages m LEFT JOIN delivery_state d ON d.msg_id = m.id
                WHERE m.id = ANY(%s)""",
            ([parse_id("msg", i) for i in ids],),
        )
        return {format_id("msg", r["id"]): r for r in await cur.fetchall()}


async def test_a_read_batch_answers_each_item_in_order(
    gateway: Gateway,
    gateway_client: httpx.AsyncClient,
    acme_agents: tuple[World, SimAgent, SimAgent],
) -> None:
    acme, alice, bob = acme_agents
    client = gateway_client
    ids = [await send(client, alice, bob, n) for n in range(4)]
    handed = {d["msg_id"]: d for d in (await poll(client, bob, max=10))["deliveries"]}
    assert set(handed) == set(ids)
    first_read = [{"msg_id": ids[0]}]
    assert await settle(client, bob, "read", first_read) == [(ids[0], "ok", "read")]
    token = handed[ids[1]]["ack_token"]
    assert await settle(client, bob, "ack", [{"msg_id": ids[1], "ack_token": token}]) == [
        (ids[1], "ok", "delivered")
    ]
    read_at = datetime.now(UTC) - timedelta(seconds=5)
    stranger = format_id("msg", uuid7())
    reads = [{"msg_id": i, "read_at": format_ts(read_at)} for i in (ids[3], ids[0], stranger)]
    reads.insert(1, {"msg_id": ids[1]})
    reads.append({"msg_id": ids[2], "read_at": format_ts(read_at)})
    assert await settle(client, bob, "read", reads) == [
        (ids[3], "ok", "read"),
        (ids[1], "ok", "read"),
        (ids[0], "already_acked", "read"),
        (stranger, "invalid", None),
        (ids[2], "ok", "read"),
    ]
    rows = await states(gateway, acme, ids)
    assert {r["status"] for r in rows.values()} == {"read"}
    for msg_id in (ids[2], ids[3]):  # straight from fetched: the read fills the transport ack
        row = rows[msg_id]
        assert row["transport_acked_at"] is not None
        assert row["delivered_at"] is not None
        assert abs((row["application_acked_at"] - read_at).total_seconds()) < 0.01
        assert abs((row["read_at"] - read_at).total_seconds()) < 0.01
    assert rows[ids[1]]["transport_acked_at"] < rows[ids[1]]["application_acked_at"]
    assert (await poll(client, bob))["deliveries"] == []


async def test_an_ack_batch_with_a_repeated_id_sees_its_own_change(
    gateway: Gateway,
    gateway_client: httpx.AsyncClient,
    acme_agents: tuple[World, SimAgent, SimAgent],
) -> None:
    acme, alice, bob = acme_agents
    client = gateway_client
    ids = [await send(client, alice, bob, n) for n in range(2)]
    tokens = {d["msg_id"]: d["ack_token"] for d in (await poll(client, bob, max=10))["deliveries"]}
    acks = [{"msg_id": i, "ack_token": tokens[i]} for i in (ids[0], ids[1], ids[0])]
    assert await settle(client, bob, "ack", acks) == [
        (ids[0], "ok", "delivered"),
        (ids[1], "ok", "delivered"),
        (ids[0], "already_acked", "delivered"),
    ]
    rows = await states(gateway, acme, ids)
    assert all(r["transport_acked_at"] is not None for r in rows.values())
    assert all(r["application_acked_at"] is None for r in rows.values())


async def test_pending_estimate_comes_from_the_pulled_copies(
    gateway: Gateway,
    gateway_client: httpx.AsyncClient,
    acme_agents: tuple[World, SimAgent, SimAgent],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _acme, alice, bob = acme_agents
    for n in range(3):
        await send(gateway_client, alice, bob, n)
    await poll(gateway_client, bob, max=1)  # creates the consumer; two are left

    async def no_info(*_args: Any, **_kw: Any) -> Any:
        raise AssertionError("the pull already knows what is pending")

    monkeypatch.setattr(gateway.broker.js, "consumer_info", no_info)
    assert (await poll(gateway_client, bob, max=1))["pending_estimate"] == 1
    assert (await poll(gateway_client, bob, max=5))["pending_estimate"] == 0


async def test_the_reads_and_acks_of_many_agents_are_written_together(
    gateway_app: FastAPI, gateway: Gateway, gateway_client: httpx.AsyncClient
) -> None:
    """Agents that settle at the same moment share a round (one transaction): each is answered
    as if alone, a read of another agent's message in the same round is ``invalid`` and
    changes nothing, and a repeated id across the round's batches still sees its first
    change."""
    client = gateway_client
    world = await make_world(gateway, "acme")
    agents = [await enroll(client, world, f"agent-{n}") for n in range(8)]
    sender, readers = agents[0], agents[1:]
    sent = {r.agent_id: await send(client, sender, r, n) for n, r in enumerate(readers)}
    tokens = {}
    for reader in readers:
        [delivery] = (await poll(client, reader, wait_s=5))["deliveries"]
        tokens[reader.agent_id] = delivery["ack_token"]
    svc: DeliveryService = gateway_app.state.delivery
    acks = [
        settle(client, r, "ack", [{"msg_id": sent[r.agent_id], "ack_token": tokens[r.agent_id]}])
        for r in readers[:4]
    ]
    reads = [settle(client, r, "read", [{"msg_id": sent[r.agent_id]}]) for r in readers[4:]]
    intruder = settle(client, readers[6], "read", [{"msg_id": sent[readers[0].agent_id]}])
    answers = await asyncio.gather(*acks, *reads, intruder)
    assert answers[:4] == [[(sent[r.agent_id], "ok", "delivered")] for r in readers[:4]]
    assert answers[4:7] == [[(sent[r.agent_id], "ok", "read")] for r in readers[4:]]
    assert answers[7] == [(sent[readers[0].agent_id], "invalid", None)]
    assert svc.rounds["ack"].rounds < 4
    assert svc.rounds["read"].rounds < 4
    rows = await states(gateway, world, list(sent.values()))
    assert {i: r["status"] for i, r in rows.items()} == {
        sent[r.agent_id]: "delivered" if n < 4 else "read" for n, r in enumerate(readers)
    }
    assert all(rows[i]["transport_acked_at"] is not None for i in sent.values())

    again = [{"msg_id": sent[readers[1].agent_id]}]
    twice = await asyncio.gather(*(settle(client, readers[1], "read", again) for _ in range(2)))
    assert sorted(result for [(_id, result, _status)] in twice) == ["already_acked", "ok"]


async def test_the_pulls_of_many_agents_are_written_together(
    gateway_app: FastAPI, gateway: Gateway, gateway_client: httpx.AsyncClient
) -> None:
    """Agents whose copies arrive at the same moment share a round: each is handed its own
    message and nobody else's, marked fetched for it alone."""
    client = gateway_client
    world = await make_world(gateway, "acme")
    agents = [await enroll(client, world, f"agent-{n}") for n in range(8)]
    sender, readers = agents[0], agents[1:]
    sent = {r.agent_id: await send(client, sender, r, n) for n, r in enumerate(readers)}
    svc: DeliveryService = gateway_app.state.delivery
    before = svc.rounds["pull"].rounds if "pull" in svc.rounds else 0
    answers = await asyncio.gather(*(poll(client, r, wait_s=5) for r in readers))
    assert [[d["msg_id"] for d in a["deliveries"]] for a in answers] == [
        [sent[r.agent_id]] for r in readers
    ]
    assert svc.rounds["pull"].rounds - before < len(readers)  # some pulls shared a round
    async with tenant_transaction(gateway.pool, SCOPE, world.tenant_id) as conn:
        cur = await conn.execute(
            """SELECT m.id, m.status::text AS status, d.agent_id, d.attempt
                 FROM messages m JOIN delivery_state d ON d.msg_id = m.id
                WHERE m.id = ANY(%s)""",
            ([parse_id("msg", i) for i in sent.values()],),
        )
        rows = {format_id("msg", r["id"]): r for r in await cur.fetchall()}
    assert {
        i: (r["status"], format_id("agt", r["agent_id"]), r["attempt"]) for i, r in rows.items()
    } == {sent[r.agent_id]: ("fetched", r.agent_id, 1) for r in readers}
