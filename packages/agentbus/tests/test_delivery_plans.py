"""The batch statements of the send and delivery paths reach ``messages`` one id at a time by
index, whatever the planner's statistics say.

A fresh partition has no statistics, and one whose rows have moved through the statuses is full
of dead index entries until the next vacuum. Joining an id array to ``messages`` left the plan to
the statistics, and PostgreSQL scanned the tenant's rows (a bitmap over its index) or the whole
partial index of open statuses. Here a tenant gets a few thousand rows that went through the
statuses, unanalyzed, and every plan of ``store.load``, ``lock_many``, ``mark_fetched``,
``ack_many`` and ``messages.claim_ids`` may touch the populated partitions only by an index
condition on the id or by TID, also when nested loops look dear. Writing by TID must not lose
a row another transaction changed meanwhile: the pull's update and ``record_receipts`` each
wait for a row held by another transaction and must still write the version it committed.
And the lookups by id leave out the empty partitions created months ahead.
"""

from __future__ import annotations

import asyncio
import re
import uuid
from collections.abc import Coroutine
from typing import Any

import httpx
import psycopg
import pytest
from agentbus.db import SCOPE, pipelined_transaction
from agentbus.delivery import store
from agentbus.delivery.domain import Status
from agentbus.gateway.context import Gateway
from agentbus.gateway.store import messages
from agentbus.gateway.testkit import SimAgent, World, enroll, make_world, send_message
from agentbus.ids import parse_id
from platformkit.db.scope import Conn, tenant_transaction
from psycopg import sql

BULK = 3000
SENT = 40  # enough ids that joining them by hash to all the tenant's rows looks cheaper
ALLOWED = {"Index Scan", "Index Only Scan", "Tid Scan"}
ID_CONDITION = re.compile(r"(?<!\w)(msg_)?id = ")  # the message id, not tenant_id


NAMED_PARAM = re.compile(r"%\((\w+)\)[sbt]")
PLANS = ["custom", "generic"]


class Explaining:
    """A connection that records the plan of every statement it runs.

    ``custom``: the plan for the statement's values, as an unprepared statement gets it.
    ``generic``: the plan a prepared statement gets under ``plan_cache_mode =
    force_generic_plan`` (set by ``pipelined_transaction``), for no values in particular: the
    statement is prepared as it runs, then ``EXPLAIN EXECUTE``d."""

    def __init__(self, conn: Conn, plans: str = "custom") -> None:
        self.conn, self.generic = conn, plans == "generic"
        self.plans: list[tuple[str, dict[str, Any]]] = []

    async def execute(self, query: Any, params: Any = None) -> Any:
        if str(query).startswith("RESET "):  # a utility statement: nothing to plan
            return await self.conn.execute(query, params)
        if self.generic:
            return await self._run_prepared(str(query), params)
        cur = await self.conn.execute(f"EXPLAIN (FORMAT JSON) {query}", params)
        self.plans.append((str(query), await self._plan(cur)))
        return await self.conn.execute(query, params)

    async def _run_prepared(self, query: str, params: Any) -> Any:
        marker = f"/* explained {len(self.plans)} */"
        cur = await self.conn.execute(f"{marker} {query}", params, prepare=True)
        found = await self.conn.execute(
            "SELECT name FROM pg_prepared_statements WHERE starts_with(statement, %s)", (marker,)
        )
        prepared = await found.fetchone()
        assert prepared is not None, f"not prepared: {query}"
        values = (
            [params[name] for name in dict.fromkeys(NAMED_PARAM.findall(query))]
            if isinstance(params, dict)
            else list(params or [])
        )
        # EXPLAIN takes no parameters of its own: the values go in as literals.
        args = sql.SQL("({})").format(sql.SQL(", ").join(map(sql.Literal, values)))
        explained = await self.conn.execute(
            sql.SQL("EXPLAIN (FORMAT JSON) EXECUTE {}{}").format(
                sql.Identifier(prepared["name"]), args if values else sql.SQL("")
            )
        )
        self.plans.append((query, await self._plan(explained)))
        return cur

    @staticmethod
    async def _plan(cur: Any) -> dict[str, Any]:
        row = await cur.fetchone()
        assert row is not None
        plan: dict[str, Any] = row["QUERY PLAN"][0]["Plan"]
        return plan


def scans_of(node: dict[str, Any], table: str) -> list[dict[str, Any]]:
    """The scans of ``table`` (or its partitions) in a plan, not the table an UPDATE writes."""
    found = []
    relation = str(node.get("Relation Name", ""))
    if relation.startswith(table) and node["Node Type"] != "ModifyTable":
        found.append(node)
    for child in node.get("Plans", []):
        found.extend(scans_of(child, table))
    return found


async def populated(conn: Conn) -> set[str]:
    """The partitions of ``messages`` holding rows (a scan of an empty one costs nothing, and
    the planner rightly reads it by whichever index comes first)."""
    cur = await conn.execute("SELECT DISTINCT tableoid::regclass::text AS part FROM messages")
    return {row["part"] for row in await cur.fetchall()} | {"delivery_state"}


def assert_probes_by_id(explaining: Explaining, parts: set[str]) -> None:
    assert any(scans_of(plan, "messages") for _query, plan in explaining.plans)
    for query, plan in explaining.plans:
        for scan in scans_of(plan, "messages") + scans_of(plan, "delivery_state"):
            if scan["Relation Name"] not in parts:
                continue
            kind = scan["Node Type"]
            assert kind in ALLOWED, f"{kind} on {scan['Relation Name']} in {query}"
            if kind != "Tid Scan":
                assert ID_CONDITION.search(scan.get("Index Cond", "")), f"{scan} in {query}"


async def while_held[T](
    gateway: Gateway, tenant_id: uuid.UUID, msg_id: uuid.UUID, operation: Coroutine[Any, Any, T]
) -> T:
    """Run ``operation`` while another transaction holds the row of ``msg_id`` (with an update
    it commits a moment later); the operation must wait for that commit. Its result."""
    holder_in, release = asyncio.Event(), asyncio.Event()

    async def hold() -> None:
        async with tenant_transaction(gateway.pool, SCOPE, tenant_id) as conn:
            await conn.execute("UPDATE messages SET attempts = attempts WHERE id = %s", (msg_id,))
            holder_in.set()
            await release.wait()

    holder = asyncio.create_task(hold())
    await holder_in.wait()
    task = asyncio.create_task(operation)
    await asyncio.sleep(0.3)  # the operation now waits for the row's lock
    assert not task.done()
    release.set()
    await holder
    return await asyncio.wait_for(task, 10)


@pytest.fixture
async def busy(
    gateway: Gateway, gateway_client: httpx.AsyncClient, agentbus_db: str
) -> tuple[World, SimAgent, SimAgent, list[uuid.UUID]]:
    """``SENT`` messages alice -> bob through the API, then thousands of rows of the same tenant
    that were accepted, fetched and read (dead index entries and all), with their
    delivery_state rows, never analyzed."""
    acme = await make_world(gateway, "acme")
    alice = await enroll(gateway_client, acme, "alice")
    bob = await enroll(gateway_client, acme, "bob")
    ids = [
        parse_id("msg", await send_message(gateway_client, alice, bob, {"text": f"plan {n}"}))
        for n in range(SENT)
    ]
    # written as the database's owner with triggers off: row by row they would keep conversation
    # statistics and events, which no plan here reads, and updating one
    # conversation's row thousands of times in one transaction took most of each test's time
    async with await psycopg.AsyncConnection.connect(agentbus_db) as admin:
        cur = await admin.execute(
            """SELECT string_agg(quote_ident(attname), ', ' ORDER BY attnum) AS names
                 FROM pg_attribute
                WHERE attrelid = 'messages'::regclass AND attnum > 0 AND NOT attisdropped
                  AND attname NOT IN ('id', 'trace_id', 'status', 'stream_seq')"""
        )
        row = await cur.fetchone()
        assert row is not None
        names = row[0]
        seed = [
            f"""INSERT INTO messages (id, status, {names})
                SELECT gen_random_uuid(), 'accepted', {names}
                  FROM messages, generate_series(1, {BULK // SENT})
                 WHERE id = ANY(%s)""",
            """INSERT INTO delivery_state (tenant_id, msg_id, agent_id, attempt)
               SELECT tenant_id, id, to_agent_id, 1 FROM messages WHERE NOT (id = ANY(%s))""",
            *(
                f"UPDATE messages SET {moved} WHERE NOT (id = ANY(%s))"
                for moved in ("stream_seq = 1", "status = 'fetched'", "status = 'read'")
            ),
        ]
        for statement in seed:  # one transaction each: every update leaves dead entries
            async with admin.transaction():
                await admin.execute("SET LOCAL session_replication_role = replica")
                await admin.execute(statement, (ids,))  # type: ignore[arg-type]
    return acme, alice, bob, ids


@pytest.mark.parametrize("plans", PLANS)
@pytest.mark.parametrize("joins", ["as estimated", "nested loops dearer"])
async def test_delivery_statements_probe_by_id(
    gateway: Gateway,
    busy: tuple[World, SimAgent, SimAgent, list[uuid.UUID]],
    joins: str,
    plans: str,
) -> None:
    """Without statistics, the tenant's share of a partition is a guess (0.5% of its rows), and
    a generic plan is made for arrays of unknown length: joining the ids to all of the tenant's
    rows by hash can look cheaper than probing. Making nested loops dearer shows whether any
    plan can fall back to that scan."""
    acme, _alice, bob, ids = busy
    bob_id = parse_id("agt", bob.agent_id)
    async with pipelined_transaction(gateway.pool, acme.tenant_id) as conn:
        if joins != "as estimated":
            await conn.execute("SET LOCAL enable_nestloop = off")
        explaining = Explaining(conn, plans)
        who: Any = explaining  # the store functions only call execute
        rows = await store.load(who, acme.tenant_id, dict.fromkeys(ids, bob_id))
        assert set(rows) == set(ids)
        fetched = [r | {"attempt": 1, "stream_seq": None} for r in rows.values()]
        assert await store.mark_fetched(who, acme.tenant_id, fetched) == set(ids)
        locked = await store.lock_many(who, acme.tenant_id, dict.fromkeys(ids, bob_id))
        assert set(locked) == set(ids)
        moved = await store.ack_many(
            who, acme.tenant_id, list(locked.values()), Status.READ, [None] * len(ids)
        )
        assert moved == set(ids)
        parts = await populated(conn)
    assert_probes_by_id(explaining, parts)


@pytest.mark.parametrize("plans", PLANS)
async def test_the_send_claim_probes_by_id(
    gateway: Gateway, busy: tuple[World, SimAgent, SimAgent, list[uuid.UUID]], plans: str
) -> None:
    acme, _alice, _bob, ids = busy
    async with pipelined_transaction(gateway.pool, acme.tenant_id) as conn:
        explaining = Explaining(conn, plans)
        who: Any = explaining
        existing, _now = await messages.claim_ids(who, acme.tenant_id, ids)
        assert set(existing) == set(ids)
        parts = await populated(conn)
    assert_probes_by_id(explaining, parts)


async def test_a_row_changed_while_the_pull_waits_is_still_marked_fetched(
    gateway: Gateway, busy: tuple[World, SimAgent, SimAgent, list[uuid.UUID]]
) -> None:
    """The pull's update waits for a row another transaction holds (the send path writing
    ``stream_seq`` as the pull arrives) and then writes the version that transaction
    committed: an update that looked for the old version by TID would miss the row, report it
    moved by someone else, and the pull would drop the copy."""
    acme, _alice, bob, ids = busy
    bob_id = parse_id("agt", bob.agent_id)
    async with tenant_transaction(gateway.pool, SCOPE, acme.tenant_id) as conn:
        rows = await store.load(conn, acme.tenant_id, {ids[0]: bob_id})
    copies = [r | {"attempt": 1, "stream_seq": None} for r in rows.values()]

    async def pull() -> set[uuid.UUID]:
        async with pipelined_transaction(gateway.pool, acme.tenant_id) as conn:
            return await store.mark_fetched(conn, acme.tenant_id, copies)

    assert await while_held(gateway, acme.tenant_id, ids[0], pull()) == {ids[0]}
    async with tenant_transaction(gateway.pool, SCOPE, acme.tenant_id) as conn:
        after = await store.load(conn, acme.tenant_id, {ids[0]: bob_id})
    assert after[ids[0]]["status"] == "fetched"


async def test_a_row_changed_while_a_settle_waits_is_locked_as_committed(
    gateway: Gateway, busy: tuple[World, SimAgent, SimAgent, list[uuid.UUID]]
) -> None:
    """A settle's lock (``lock_many``, FOR UPDATE) waits for a row another transaction holds,
    then rechecks the version that transaction committed and locks it: the kind of wait under
    which a locking lookup bounded above crashed PostgreSQL 18.6 in ``record_receipts``
    (delivery/store.py)."""
    acme, _alice, bob, ids = busy
    bob_id = parse_id("agt", bob.agent_id)

    async def settle() -> dict[uuid.UUID, Any]:
        async with pipelined_transaction(gateway.pool, acme.tenant_id) as conn:
            return await store.lock_many(conn, acme.tenant_id, {ids[2]: bob_id})

    locked = await while_held(gateway, acme.tenant_id, ids[2], settle())
    assert set(locked) == {ids[2]}


async def test_record_receipts_writes_a_row_changed_while_it_waits(
    gateway: Gateway, busy: tuple[World, SimAgent, SimAgent, list[uuid.UUID]]
) -> None:
    """``record_receipts`` (migration 0009) locks first and updates after, in statements of
    their own, so a sequence is written to the version another transaction committed while
    the function waited for it."""
    acme, _alice, _bob, ids = busy
    async with tenant_transaction(gateway.pool, SCOPE, acme.tenant_id) as conn:
        cur = await conn.execute(
            "UPDATE messages SET stream_seq = NULL WHERE id = %s RETURNING accepted_at", (ids[1],)
        )
        row = await cur.fetchone()
        assert row is not None

    async def record() -> None:
        async with gateway.pool.connection() as conn:
            await conn.execute(
                "SELECT record_receipts(%s, %s, %s, %s, %s, %s, %s, %s)",
                (acme.tenant_id, [uuid.uuid4()], [uuid.uuid4()], [ids[1]], [4242],
                 [row["accepted_at"]], [b"signature"], [row["accepted_at"]]),
            )  # fmt: skip

    await while_held(gateway, acme.tenant_id, ids[1], record())
    async with tenant_transaction(gateway.pool, SCOPE, acme.tenant_id) as conn:
        cur = await conn.execute(
            """SELECT m.stream_seq, (SELECT count(*) FROM receipts r WHERE r.msg_id = m.id
                                      AND r.stream_seq = 4242) AS receipts
                 FROM messages m WHERE m.id = %s""",
            (ids[1],),
        )
        after = await cur.fetchone()
    assert after == {"stream_seq": 4242, "receipts": 1}


async def partitions_ahead(conn: Conn) -> set[str]:
    """The partitions of ``messages`` that start more than a day from now: created ahead of
    time, and empty."""
    cur = await conn.execute(
        r"""SELECT c.relname AS part
              FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
             WHERE i.inhparent = 'messages'::regclass
               AND (regexp_match(pg_get_expr(c.relpartbound, c.oid), 'FROM \(''([^'']+)''\)'))[1]
                   ::timestamptz > now() + interval '1 day'"""
    )
    return {row["part"] for row in await cur.fetchall()}


@pytest.mark.parametrize("plans", PLANS)
async def test_lookups_by_id_leave_out_the_partitions_ahead(
    gateway: Gateway, busy: tuple[World, SimAgent, SimAgent, list[uuid.UUID]], plans: str
) -> None:
    """A lookup by id is bounded above by a day after the transaction's start, so the months
    created ahead are dropped from its plan when it starts; bounded below only, it probed each
    of them once per id."""
    acme, _alice, bob, ids = busy
    async with pipelined_transaction(gateway.pool, acme.tenant_id) as conn:
        ahead = await partitions_ahead(conn)
        explaining = Explaining(conn, plans)
        who: Any = explaining
        assert set(
            await store.load(who, acme.tenant_id, dict.fromkeys(ids, parse_id("agt", bob.agent_id)))
        )
        assert set((await messages.claim_ids(who, acme.tenant_id, ids))[0]) == set(ids)
        assert await messages.find_message(who, acme.tenant_id, ids[0]) is not None
    assert len(ahead) >= 2  # three months are created ahead; the next may start within a day
    assert len(explaining.plans) >= 3
    for query, plan in explaining.plans:
        scanned = {scan["Relation Name"] for scan in scans_of(plan, "messages")}
        assert not scanned & ahead, f"{sorted(scanned & ahead)} in {query}"
