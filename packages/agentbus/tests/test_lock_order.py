"""Statements that lock several rows lock them in one order, whoever's rows they are: messages
in id order (a pull round marking copies fetched, a receipts call recording sequences), and
conversations in id order (a send transaction's statistics trigger at commit). Rounds of
different processes hold the rows of many agents at once; locked in different orders, two of
them could wait on each other, and PostgreSQL would end that by failing one.

Each test holds the lower row from another transaction, starts the statement with its rows in
the opposite order, waits until it waits for a lock, and then checks the higher row is still
free: the statement went for the lower row first. A pull round that still meets a cycle (with a
statement of another kind) is failed by PostgreSQL; the pull then hands its copies back."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from datetime import UTC, datetime
from typing import Any

import httpx
import psycopg
from agentbus.db import SCOPE, pipelined_transaction
from agentbus.delivery import store
from agentbus.gateway.actions import send as send_module
from agentbus.gateway.api.auth import principal_from_credential
from agentbus.gateway.context import Gateway
from agentbus.gateway.store.receipts import insert_receipts
from agentbus.gateway.testkit import (
    SimAgent,
    World,
    enroll,
    make_world,
    poll_inbox,
    send_message,
)
from agentbus.ids import format_id, parse_id
from platformkit.db.scope import tenant_transaction
from platformkit.ids import uuid7

CEILING_S = 60.0
ROW_LOCK = "SELECT 1 FROM {table} WHERE id = %s FOR NO KEY UPDATE"  # what a plain update takes


async def until_waiting_for_a_lock(url: str) -> None:
    """Until some backend of this database waits for a lock (polled, with a generous ceiling)."""
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        for _ in range(int(CEILING_S / 0.05)):
            cur = await conn.execute(
                """SELECT count(*) FROM pg_stat_activity
                    WHERE datname = current_database() AND wait_event_type = 'Lock'"""
            )
            row = await cur.fetchone()
            if row is not None and row[0] > 0:
                return
            await asyncio.sleep(0.05)
    raise AssertionError("the statement never waited for the held row")


async def higher_row_free_while_lower_held(
    url: str, table: str, lower: Any, higher: Any, work: Coroutine[Any, Any, Any]
) -> bool:
    """Hold ``lower`` of ``table`` (a lock a plain update takes), run ``work`` until it waits,
    and say whether ``higher`` could still be locked then; ``work`` finishes afterwards."""
    lock = ROW_LOCK.format(table=table)
    async with await psycopg.AsyncConnection.connect(url) as holder:
        await holder.execute(lock, (lower,))
        task = asyncio.create_task(work)
        await until_waiting_for_a_lock(url)
        async with await psycopg.AsyncConnection.connect(url) as probe:
            try:
                await probe.execute(lock + " NOWAIT", (higher,))
                free = True
            except psycopg.errors.LockNotAvailable:
                free = False
            await probe.rollback()
        await holder.rollback()
    await asyncio.wait_for(task, CEILING_S)
    return free


async def two_messages(
    gateway: Gateway, client: httpx.AsyncClient
) -> tuple[World, SimAgent, SimAgent, list[dict[str, Any]]]:
    """alice -> bob twice, each in a conversation of its own: the two rows, lower id first."""
    world = await make_world(gateway, "acme")
    alice, bob = await enroll(client, world, "alice"), await enroll(client, world, "bob")
    ids = [
        parse_id("msg", await send_message(client, alice, bob, {"text": f"message {n}"}))
        for n in range(2)
    ]
    async with tenant_transaction(gateway.pool, SCOPE, world.tenant_id) as conn:
        cur = await conn.execute(
            """SELECT id, accepted_at, to_agent_id, conversation_id FROM messages
                WHERE id = ANY(%s) ORDER BY id""",
            (ids,),
        )
        rows = await cur.fetchall()
    assert [r["id"] for r in rows] == sorted(ids)
    return world, alice, bob, rows


async def test_a_pull_round_locks_its_messages_in_id_order(
    gateway: Gateway, gateway_client: httpx.AsyncClient, agentbus_db: str
) -> None:
    world, _alice, _bob, (low, high) = await two_messages(gateway, gateway_client)
    copies = [r | {"attempt": 1, "stream_seq": None} for r in (high, low)]

    async def pull() -> set[Any]:
        async with pipelined_transaction(gateway.pool, world.tenant_id) as conn:
            return await store.mark_fetched(conn, world.tenant_id, copies)

    free = await higher_row_free_while_lower_held(
        agentbus_db, "messages", low["id"], high["id"], pull()
    )
    assert free, "the pull took the higher id first"


async def test_a_receipts_call_locks_its_messages_in_id_order(
    gateway: Gateway, gateway_client: httpx.AsyncClient, agentbus_db: str
) -> None:
    world, _alice, _bob, (low, high) = await two_messages(gateway, gateway_client)
    rows = [
        {"id": uuid7(), "msg_id": r["id"], "stream_seq": seq, "issued_at": datetime.now(UTC),
         "signature": b"s", "issued_to_token": uuid7(), "message_accepted_at": r["accepted_at"]}
        for seq, r in ((2, high), (1, low))
    ]  # fmt: skip

    async def record() -> None:
        async with gateway.pool.connection() as conn:
            await insert_receipts(conn, world.tenant_id, rows)

    free = await higher_row_free_while_lower_held(
        agentbus_db, "messages", low["id"], high["id"], record()
    )
    assert free, "record_receipts took the higher id first"


async def test_a_shared_send_transaction_updates_its_conversations_in_id_order(
    gateway: Gateway, gateway_client: httpx.AsyncClient, agentbus_db: str
) -> None:
    """Two requests of one round send into two existing conversations, the higher one first;
    at commit the statistics trigger updates the lower conversation first."""
    world, alice, bob, (low, high) = await two_messages(gateway, gateway_client)
    who = await principal_from_credential(gateway, alice.credential)
    batches = []
    for row in (high, low):
        conversation = format_id("cnv", row["conversation_id"])
        env = alice.sign(alice.envelope(bob.address, {"text": "again"}, conversation=conversation))
        now = datetime.now(UTC)
        parsed = send_module._checked(env, who, now)
        batches.append(send_module._Batch(who, [(send_module._lane(env), parsed)], now, None))

    async def send() -> None:
        done = await send_module._round(gateway, world.tenant_id, batches)
        assert all(isinstance(b, send_module._Batch) and b.accepted for b in done.values())

    free = await higher_row_free_while_lower_held(
        agentbus_db, "conversations", low["conversation_id"], high["conversation_id"], send()
    )
    assert free, "the shared transaction updated the higher conversation first"


async def test_a_pull_that_loses_a_deadlock_hands_its_copies_back(
    gateway: Gateway, gateway_client: httpx.AsyncClient, agentbus_db: str
) -> None:
    """Another transaction holds bob's higher message; bob's pull round locks the lower one
    and waits; the other transaction then asks for the lower one: a cycle, which PostgreSQL
    ends by failing the pull (the other side waits longer before it looks). The pull wrote
    nothing, answers no delivery and hands its copies back at once: the next pull gets both."""
    _world, _alice, bob, (low, high) = await two_messages(gateway, gateway_client)
    lock = ROW_LOCK.format(table="messages")
    async with await psycopg.AsyncConnection.connect(agentbus_db) as holder:
        await holder.execute("SET deadlock_timeout = '60s'")
        await holder.execute(lock, (high["id"],))
        pulling = asyncio.create_task(poll_inbox(gateway_client, bob, wait_s=5))
        await until_waiting_for_a_lock(agentbus_db)
        await holder.execute(lock, (low["id"],))  # returns once PostgreSQL failed the pull
        await holder.rollback()
    first = await asyncio.wait_for(pulling, CEILING_S)
    assert first["deliveries"] == []
    again = await poll_inbox(gateway_client, bob, wait_s=5)
    got = sorted(parse_id("msg", d["msg_id"]) for d in again["deliveries"])
    assert got == [low["id"], high["id"]]
