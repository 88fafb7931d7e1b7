"""Retention on real PostgreSQL and NATS (data model §1.11, §8): messages past their tenant's
retention go with their delivery state, receipts and payload objects, batch by batch, and
nothing younger or of a tenant keeping longer; a partition wholly past the longest retention is
dropped once empty, and kept (with its row security) while it holds rows."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

import httpx
import psycopg
import pytest
from agentbus.cli import app as cli
from agentbus.controllers.retention import Retention, drop_partitions
from agentbus.db import SCOPE
from agentbus.gateway.context import Gateway
from agentbus.gateway.store.objectstore import ObjectMissing
from agentbus.gateway.testkit import (
    SimAgent,
    alice_and_bob,
    enroll,
    make_world,
    poll_inbox,
    post_envelope,
)
from agentbus.ids import parse_id
from platformkit.db.scope import tenant_transaction
from typer.testing import CliRunner

Json = dict[str, Any]


async def _send(client: httpx.AsyncClient, alice: SimAgent, bob: SimAgent, text: str) -> str:
    env = alice.envelope(bob.address, {"text": text})
    await post_envelope(client, alice, env)
    return str(env["id"])


async def _age(agentbus_db: str, msg_ids: list[str], interval: str) -> None:
    """Move messages back in time (into older partitions, which are made first)."""
    async with await psycopg.AsyncConnection.connect(agentbus_db, autocommit=True) as admin:
        await admin.execute(
            "SELECT ensure_message_partitions(0, now() - %s::interval)", (interval,)
        )
        await admin.execute(
            "UPDATE messages SET accepted_at = accepted_at - %s::interval WHERE id = ANY(%s)",
            (interval, [parse_id("msg", m) for m in msg_ids]),
        )


async def _counts(gateway: Gateway, tenant_id: Any, msg_id: str) -> tuple[int, int, int, bool]:
    """(messages, delivery_state, receipts) rows of one message, and whether it has events."""
    async with tenant_transaction(gateway.pool, SCOPE, tenant_id) as conn:
        cur = await conn.execute(
            """SELECT (SELECT count(*) FROM messages WHERE id = %(m)s) AS messages,
                      (SELECT count(*) FROM delivery_state WHERE msg_id = %(m)s) AS states,
                      (SELECT count(*) FROM receipts WHERE msg_id = %(m)s) AS receipts,
                      EXISTS (SELECT 1 FROM events WHERE message_id = %(m)s) AS history""",
            {"m": parse_id("msg", msg_id)},
        )
        row = await cur.fetchone()
    assert row is not None
    return row["messages"], row["states"], row["receipts"], row["history"]


async def _payload_ref(gateway: Gateway, tenant_id: Any, msg_id: str) -> str:
    async with tenant_transaction(gateway.pool, SCOPE, tenant_id) as conn:
        cur = await conn.execute(
            "SELECT payload_ref FROM messages WHERE id = %s", (parse_id("msg", msg_id),)
        )
        row = await cur.fetchone()
    assert row is not None
    return str(row["payload_ref"])


async def test_messages_past_retention_go_with_everything_that_names_them(
    agentbus_db: str, gateway: Gateway, gateway_client: httpx.AsyncClient
) -> None:
    client = gateway_client
    world, alice, bob = await alice_and_bob(gateway, client)  # starter: 7 days
    old = [await _send(client, alice, bob, f"old {n}") for n in range(3)]
    fresh = await _send(client, alice, bob, "fresh")
    assert len((await poll_inbox(client, bob, wait_s=5, max=10))["deliveries"]) == 4
    other = await make_world(gateway, "globex")
    carol, dave = await enroll(client, other, "carol"), await enroll(client, other, "dave")
    kept_longer = await _send(client, carol, dave, "globex keeps 30 days")
    async with await psycopg.AsyncConnection.connect(agentbus_db, autocommit=True) as admin:
        await admin.execute(
            "UPDATE tenants SET retention_days = 30 WHERE id = %s", (other.tenant_id,)
        )
    refs = {m: await _payload_ref(gateway, world.tenant_id, m) for m in [*old, fresh]}
    await _age(agentbus_db, [*old, kept_longer], "8 days")
    assert await _counts(gateway, world.tenant_id, old[0]) == (1, 1, 1, True)

    retention = Retention(gateway.pool, gateway.objects, batch=2)
    assert await retention.run_once() == 3  # two batches for acme, nothing for globex
    for msg_id in old:
        assert await _counts(gateway, world.tenant_id, msg_id) == (0, 0, 0, False)
        with pytest.raises(ObjectMissing):
            await gateway.objects.get(refs[msg_id])
    assert await _counts(gateway, world.tenant_id, fresh) == (1, 1, 1, True)
    assert await gateway.objects.get(refs[fresh])
    assert (await _counts(gateway, other.tenant_id, kept_longer))[0] == 1
    assert await retention.run_once() == 0
    reply = await client.get(f"/v1/messages/{fresh}?include=envelope", headers=alice.headers())
    assert reply.json()["envelope"]["data"] == {"text": "fresh"}, reply.text


async def _exists(agentbus_db: str, table: str) -> bool:
    async with await psycopg.AsyncConnection.connect(agentbus_db, autocommit=True) as admin:
        row = await (await admin.execute("SELECT to_regclass(%s) IS NOT NULL", (table,))).fetchone()
    return bool(row and row[0])


async def test_an_old_partition_is_dropped_once_empty_and_kept_while_it_holds_rows(
    agentbus_db: str, gateway: Gateway, gateway_client: httpx.AsyncClient
) -> None:
    client = gateway_client
    _world, alice, bob = await alice_and_bob(gateway, client)
    straggler = await _send(client, alice, bob, "two years late")
    await _age(agentbus_db, [straggler], "730 days")
    async with await psycopg.AsyncConnection.connect(agentbus_db, autocommit=True) as admin:
        await admin.execute("SELECT ensure_message_partitions(0, now() - interval '790 days')")
        oldest, holding = [
            row[0]
            for row in await (
                await admin.execute(
                    """SELECT c.relname::text FROM pg_inherits i
                         JOIN pg_class c ON c.oid = i.inhrelid
                        WHERE i.inhparent = 'messages'::regclass ORDER BY c.relname LIMIT 2"""
                )
            ).fetchall()
        ]

    first = {r["partition_name"]: r["dropped"] for r in await drop_partitions(gateway.pool)}
    assert (first[oldest], first[holding]) == (True, False)
    assert not await _exists(agentbus_db, oldest)
    async with await psycopg.AsyncConnection.connect(agentbus_db, autocommit=True) as admin:
        cur = await admin.execute(
            "SELECT relforcerowsecurity FROM pg_class WHERE relname = %s", (holding,)
        )
        assert await cur.fetchone() == (True,), "a kept partition keeps its forced row security"
    # By hand, as an operator would: the same jobs, on the gateway's configuration.
    env = {"AGENTBUS_CONFIG_DIR": str(gateway.settings.config_dir)}
    run = await asyncio.to_thread(
        CliRunner().invoke, cli, ["retention", "--database-url", agentbus_db], env=env
    )
    assert run.exit_code == 0, run.output
    assert "deleted 1 messages past retention" in run.output
    assert f"dropped {holding}" in run.output
    assert not await _exists(agentbus_db, holding)
    current = datetime.now(UTC).strftime("messages_%Y_%m")
    assert await _exists(agentbus_db, current), "partitions within the longest retention stay"
