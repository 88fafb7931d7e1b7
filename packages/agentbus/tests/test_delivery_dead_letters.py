"""Dead letters and expiry on real PostgreSQL and NATS: MaxDeliver reached through naks -> the
advisory captured in AB_ADVISORIES -> the dlq-worker dead-letters the message (a task request
fails its task, AB-6011); the dlq.sweep backstop; messages.expire for copies TTL removed (a
task request expires its task, AB-6010) and the implicit expiry near retention; tasks.expire."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import psycopg
import pytest
from agentbus.db import SCOPE
from agentbus.delivery.domain import MAX_DELIVER
from agentbus.delivery.sweeper import Sweeper
from agentbus.gateway.context import Gateway
from agentbus.gateway.domain.wire import format_ts
from agentbus.gateway.testkit import (
    SimAgent,
    World,
    alice_and_bob,
    nak_until_dead_lettered,
    post_envelope,
)
from agentbus.ids import parse_id
from agentbus.tasks import sweeper as task_sweeper
from platformkit.db.scope import tenant_transaction

Json = dict[str, Any]


def task_request(alice: SimAgent, bob: SimAgent, key: str, **data: Any) -> Json:
    return alice.task_request(bob.address, key, {"instructions": "review", **data})


async def facts(gateway: Gateway, world: World, msg_id: str) -> Json:
    """The message's status and dlq_reason, and its task's state and error code, if any."""
    async with tenant_transaction(gateway.pool, SCOPE, world.tenant_id) as conn:
        cur = await conn.execute(
            """SELECT m.status::text AS status, m.attempts, d.dlq_reason,
                      t.state::text AS task_state, t.error_code
                 FROM messages m
                 LEFT JOIN delivery_state d ON d.msg_id = m.id
                 LEFT JOIN tasks t ON t.id = m.id
                WHERE m.id = %s""",
            (parse_id("msg", msg_id),),
        )
        row = await cur.fetchone()
    assert row is not None
    return dict(row)


@pytest.fixture
async def trio(
    gateway: Gateway, gateway_client: httpx.AsyncClient
) -> tuple[World, SimAgent, SimAgent]:
    return await alice_and_bob(gateway, gateway_client)


async def test_max_deliver_dead_letters_through_the_advisory(
    gateway: Gateway, gateway_client: httpx.AsyncClient, trio: tuple[World, SimAgent, SimAgent]
) -> None:
    client, (world, alice, bob) = gateway_client, trio
    env = task_request(alice, bob, "poison")
    await post_envelope(client, alice, env, "/v1/tasks")
    handled = await nak_until_dead_lettered(gateway, client, world, bob, env["id"])
    assert handled >= 1
    seen = await facts(gateway, world, env["id"])
    assert seen == {
        "status": "dead_lettered",
        "attempts": MAX_DELIVER,
        "dlq_reason": "max_deliveries",
        "task_state": "failed",
        "error_code": "AB-6011",
    }


async def test_sweeper_backstop_dead_letters_a_stuck_fetch(
    agentbus_db: str,
    gateway: Gateway,
    gateway_client: httpx.AsyncClient,
    trio: tuple[World, SimAgent, SimAgent],
) -> None:
    client, (world, alice, bob) = gateway_client, trio
    env = alice.envelope(bob.address, {"text": "stuck"})
    await post_envelope(client, alice, env, "/v1/messages")
    await client.get("/v1/inbox", params={"wait_s": 5}, headers=bob.headers())
    sweeper = Sweeper(gateway.pool, gateway.broker)
    assert await sweeper.dead_letter_once() == 0  # one attempt, just fetched: nothing to do
    async with await psycopg.AsyncConnection.connect(agentbus_db, autocommit=True) as admin:
        await admin.execute(
            """UPDATE delivery_state SET attempt = %s, last_fetched_at = now() - interval '2 min'
                WHERE msg_id = %s""",
            (MAX_DELIVER, parse_id("msg", env["id"])),
        )
    assert await sweeper.dead_letter_once() == 1
    assert await sweeper.dead_letter_once() == 0  # safe to repeat
    seen = await facts(gateway, world, env["id"])
    assert (seen["status"], seen["dlq_reason"]) == ("dead_lettered", "max_deliveries")


async def test_expiry_sweeper_expires_undelivered_messages_and_their_tasks(
    agentbus_db: str,
    gateway: Gateway,
    gateway_client: httpx.AsyncClient,
    trio: tuple[World, SimAgent, SimAgent],
) -> None:
    client, (world, alice, bob) = gateway_client, trio
    request = task_request(alice, bob, "expiring")
    await post_envelope(client, alice, request, "/v1/tasks")
    plain = alice.envelope(bob.address, {"text": "no expiry, but old"})
    await post_envelope(client, alice, plain, "/v1/messages")
    kept = alice.envelope(bob.address, {"text": "fresh"})
    await post_envelope(client, alice, kept, "/v1/messages")
    async with await psycopg.AsyncConnection.connect(agentbus_db, autocommit=True) as admin:
        await admin.execute("SELECT ensure_message_partitions(3, now() - interval '40 days')")
        await admin.execute(
            "UPDATE messages SET expires_at = now() - interval '1 second' WHERE id = %s",
            (parse_id("msg", request["id"]),),
        )
        # Without expires: expired one day before the tenant's retention (7 days) is reached.
        await admin.execute(
            """UPDATE messages SET accepted_at = accepted_at - interval '6 days 1 hour'
                WHERE id = %s""",
            (parse_id("msg", plain["id"]),),
        )
    sweeper = Sweeper(gateway.pool, gateway.broker)
    assert await sweeper.expire_once() == 2
    assert await sweeper.expire_once() == 0
    seen = await facts(gateway, world, request["id"])
    assert (seen["status"], seen["task_state"], seen["error_code"]) == (
        "expired",
        "expired",
        "AB-6010",
    )
    assert (await facts(gateway, world, plain["id"]))["status"] == "expired"
    assert (await facts(gateway, world, kept["id"]))["status"] == "accepted"
    # The expired copy left the stream: only the fresh message is handed out.
    polled = await client.get("/v1/inbox", params={"wait_s": 2}, headers=bob.headers())
    assert [d["msg_id"] for d in polled.json()["deliveries"]] == [kept["id"]]


async def test_tasks_expire_at_their_deadline(
    agentbus_db: str,
    gateway: Gateway,
    gateway_client: httpx.AsyncClient,
    trio: tuple[World, SimAgent, SimAgent],
) -> None:
    client, (world, alice, bob) = gateway_client, trio
    soon = format_ts(datetime.now(UTC) + timedelta(hours=1))
    request = task_request(alice, bob, "deadline", deadline=soon)
    await post_envelope(client, alice, request, "/v1/tasks")
    assert await task_sweeper.expire_once(gateway.pool) == 0
    async with await psycopg.AsyncConnection.connect(agentbus_db, autocommit=True) as admin:
        await admin.execute(
            "UPDATE tasks SET expires_at = now() - interval '1 second' WHERE id = %s",
            (parse_id("msg", request["id"]),),
        )
    assert await task_sweeper.expire_once(gateway.pool) == 1
    seen = await facts(gateway, world, request["id"])
    assert (seen["task_state"], seen["error_code"]) == ("expired", "AB-6010")
    reply = await client.get(f"/v1/tasks/{request['subject']}/transitions", headers=bob.headers())
    assert reply.json()[-1]["reason"] == "deadline passed"
