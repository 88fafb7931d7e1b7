"""Concurrent twins on the real app, PostgreSQL and NATS: the same signed envelope posted several
times at once (a client retrying while its first request still runs, or a CLI and its sidecar
sending one outbox row) is stored once; one request is accepted (202) and the others are answered
as its replay (200), for plain messages and for task requests alike."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import psycopg
from agentbus import broker
from agentbus.gateway.context import Gateway
from agentbus.gateway.testkit import SimAgent, enroll, make_world
from agentbus.ids import parse_id
from wirekit import canonical_json

SCHEMA = "https://agentbus.exchange/schemas/"
REVIEW = [{"name": "code.review", "version": "1", "description": "Review a diff"}]
TWINS = 3


async def post_twins(
    client: httpx.AsyncClient, agent: SimAgent, path: str, env: dict[str, Any]
) -> list[httpx.Response]:
    body = canonical_json(agent.sign(env))
    headers = {**agent.headers(), "Content-Type": "application/cloudevents+json"}
    return list(
        await asyncio.gather(
            *(client.post(path, content=body, headers=headers) for _ in range(TWINS))
        )
    )


def rows_of(url: str, table: str, msg_id: str) -> int:
    with psycopg.connect(url) as conn:
        row = conn.execute(
            f"SELECT count(*) FROM {table} WHERE id = %s", (parse_id("msg", msg_id),)
        ).fetchone()
    assert row is not None
    return int(row[0])


def assert_one_accepted(replies: list[httpx.Response]) -> None:
    codes = sorted(r.status_code for r in replies)
    assert codes == [200] * (TWINS - 1) + [202], [r.text for r in replies]
    replayed = [r for r in replies if r.status_code == 200]
    assert all(r.headers.get("Idempotent-Replayed") == "true" for r in replayed)
    seqs = {r.json()["receipt"]["seq"] for r in replies}
    assert len(seqs) == 1, "every answer names the one stream copy"


async def test_concurrent_twins_of_a_message_store_one_row(
    gateway: Gateway, gateway_client: httpx.AsyncClient, agentbus_db: str
) -> None:
    world = await make_world(gateway, "acme")
    alice = await enroll(gateway_client, world, "alice")
    bob = await enroll(gateway_client, world, "bob")
    sent = []
    for n in range(5):
        env = alice.envelope(bob.address, {"text": f"twin {n}"})
        assert_one_accepted(await post_twins(gateway_client, alice, "/v1/messages", env))
        assert rows_of(agentbus_db, "messages", env["id"]) == 1
        sent.append(env["id"])
    info = await gateway.broker.js.stream_info(broker.stream_name(world.tenant_id))
    assert info.state.messages == len(sent)


async def test_concurrent_twins_of_a_task_request_make_one_task(
    gateway: Gateway, gateway_client: httpx.AsyncClient, agentbus_db: str
) -> None:
    world = await make_world(gateway, "acme")
    alice = await enroll(gateway_client, world, "alice")
    bob = await enroll(gateway_client, world, "bob", capabilities=REVIEW)
    for n in range(3):
        env = alice.envelope(bob.address, {"instructions": f"review PR {n}"})
        env.update(
            type="agentbus.task.request.v1",
            dataschema=f"{SCHEMA}agentbus.task.request.v1.json",
            subject="tsk_" + env["id"][4:],
            idempotencykey=f"pr-{n}",
            capability="code.review",
        )
        replies = await post_twins(gateway_client, alice, "/v1/tasks", env)
        assert_one_accepted(replies)
        assert {r.json()["task"]["id"] for r in replies} == {env["subject"]}
        assert rows_of(agentbus_db, "messages", env["id"]) == 1
        assert rows_of(agentbus_db, "tasks", env["id"]) == 1
