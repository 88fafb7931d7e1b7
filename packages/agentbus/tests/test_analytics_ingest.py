"""PostgreSQL's events and analytics outbox into ClickHouse (chDB) through the real gateway,
PostgreSQL and NATS: a message's steps and a usage record arrive as the data model's rows with
their tenant's retention, events sent again are inserted once, an event whose transaction
commits after later ones is not passed over while another database's open transaction holds
nothing back, and a backlog left while no process ingested is drained by the next gateway's
leader loop. One chDB data path for the module (one per process)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from agentbus.analytics import history
from agentbus.analytics.backends import Backend
from agentbus.analytics.ingest import Ingester
from agentbus.db import SCOPE
from agentbus.gateway.config import GatewaySettings
from agentbus.gateway.context import Gateway
from agentbus.gateway.domain.wire import format_ts
from agentbus.gateway.testing import serving
from agentbus.gateway.testkit import (
    alice_and_bob,
    make_world,
    owner_token,
    poll_inbox,
    post_envelope,
    send_message,
    settle_inbox,
)
from agentbus.ids import format_id, parse_id
from platformkit.db.scope import tenant_transaction
from platformkit.ids import uuid7

Json = dict[str, Any]
STEPS = ["message.accepted", "message.published", "message.fetched", "message.delivered",
         "message.read"]  # fmt: skip


@pytest.fixture(scope="module")
def chdb_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("chdb")


@pytest.fixture
async def served(
    gateway_settings: GatewaySettings, chdb_dir: Path
) -> AsyncIterator[tuple[Gateway, httpx.AsyncClient]]:
    settings = gateway_settings.model_copy(update={"analytics": True, "analytics_dir": chdb_dir})
    async with serving(settings) as (app, client):
        yield app.state.gateway, client


def backend_of(gw: Gateway) -> Backend:
    assert gw.analytics is not None
    return gw.analytics


async def test_a_message_and_its_usage_arrive_as_rows(
    served: tuple[Gateway, httpx.AsyncClient],
) -> None:
    gw, client = served
    world, alice, bob = await alice_and_bob(gw, client)
    msg = await send_message(client, alice, bob, {"text": "count me"})
    [delivery] = (await poll_inbox(client, bob, wait_s=5))["deliveries"]
    await settle_inbox(client, bob, "ack", [{"msg_id": msg, "ack_token": delivery["ack_token"]}])
    await settle_inbox(
        client, bob, "read", [{"msg_id": msg, "read_at": format_ts(datetime.now(UTC))}]
    )
    usage = {"id": format_id("usg", uuid7()), "recorded_at": format_ts(datetime.now(UTC)),
             "harness": "claude", "provider": "anthropic", "model": "claude-sonnet-4-5-20250929",
             "input_tokens": 1_000_000, "output_tokens": 0}  # fmt: skip
    reply = await client.post("/v1/usage", json={"records": [usage]}, headers=bob.headers())
    assert reply.status_code == 202, reply.text

    taken = await Ingester(gw.pool, backend_of(gw)).run_once()
    assert taken >= 6

    rows = await backend_of(gw).select(
        """SELECT event, latency_ms, retention_days, toString(from_agent_id) AS from_agent
             FROM agentbus.events WHERE tenant_id = {t:UUID} AND message_id = {m:UUID}
            ORDER BY event_time, event""",
        {"t": str(world.tenant_id), "m": str(parse_id("msg", msg))},
    )
    assert sorted(r["event"] for r in rows) == sorted(STEPS)
    assert {r["retention_days"] for r in rows} == {7}  # the starter plan's, from PostgreSQL
    assert {r["from_agent"] for r in rows} == {str(parse_id("agt", alice.agent_id))}
    assert all(r["latency_ms"] is not None for r in rows)
    async with tenant_transaction(gw.pool, SCOPE, world.tenant_id) as conn:
        cur = await conn.execute(
            "SELECT event, event_time FROM events WHERE message_id = %s", (parse_id("msg", msg),)
        )
        at = {r["event"]: r["event_time"] for r in await cur.fetchall()}
    latency = {r["event"]: r["latency_ms"] for r in rows}
    accept_to_deliver = (at["message.delivered"] - at["message.accepted"]).total_seconds() * 1000
    deliver_to_read = (at["message.read"] - at["message.delivered"]).total_seconds() * 1000
    assert abs(latency["message.delivered"] - accept_to_deliver) <= 1  # the SLO view's stage
    assert abs(latency["message.read"] - deliver_to_read) <= 1
    [cost] = await backend_of(gw).select(
        """SELECT toString(sum(cost_usd)) AS usd, sum(input_tokens) AS tokens
             FROM agentbus.mv_cost_daily WHERE tenant_id = {t:UUID}""",
        {"t": str(world.tenant_id)},
    )
    assert cost["tokens"] == 1_000_000
    assert float(cost["usd"]) > 0
    async with tenant_transaction(gw.pool, SCOPE, world.tenant_id) as conn:
        left = await (await conn.execute("SELECT count(*) AS n FROM analytics_outbox")).fetchone()
    assert left is not None
    assert left["n"] == 0


async def test_events_sent_again_are_inserted_once(
    served: tuple[Gateway, httpx.AsyncClient], agentbus_db: str
) -> None:
    gw, client = served
    world, alice, bob = await alice_and_bob(gw, client)
    await send_message(client, alice, bob, {"text": "once"})
    ingester = Ingester(gw.pool, backend_of(gw))
    await ingester.run_once()
    with psycopg.connect(agentbus_db) as conn:  # as a pass that died before moving its cursor
        conn.execute("DELETE FROM analytics_event_cursors WHERE tenant_id = %s", (world.tenant_id,))
        [(written,)] = conn.execute(
            "SELECT count(*) FROM events WHERE tenant_id = %s", (world.tenant_id,)
        ).fetchall()
    assert await ingester.run_once() == written
    [counted] = await backend_of(gw).select(
        """SELECT count() AS n, uniqExact(event_id) AS ids FROM agentbus.events
            WHERE tenant_id = {t:UUID}""",
        {"t": str(world.tenant_id)},
    )
    assert counted["n"] == counted["ids"] == written > 0
    [edges] = await backend_of(gw).select(
        "SELECT sum(messages) AS n FROM agentbus.mv_edges_daily WHERE tenant_id = {t:UUID}",
        {"t": str(world.tenant_id)},
    )
    assert edges["n"] == 1


async def test_an_event_that_commits_late_is_not_passed_over(
    served: tuple[Gateway, httpx.AsyncClient], agentbus_db: str
) -> None:
    """A transaction draws its event's id, then commits after later events have committed: the
    ingester's passes meanwhile must not move the tenant's cursor past that id."""
    gw, client = served
    world, alice, bob = await alice_and_bob(gw, client)
    await send_message(client, alice, bob, {"text": "before"})
    ingester = Ingester(gw.pool, backend_of(gw))
    await ingester.run_once()
    late_message = uuid7()
    with psycopg.connect(agentbus_db) as late:
        late.execute(
            """INSERT INTO events (event, tenant_id, workspace_id, message_id, conversation_id,
                                   trace_id, span_id, from_agent_id, to_agent_id, type, actor,
                                   payload_bytes)
               SELECT 'message.fetched', tenant_id, workspace_id, %s, conversation_id, trace_id,
                      span_id, from_agent_id, to_agent_id, type, 'gateway', payload_bytes
                 FROM events WHERE tenant_id = %s LIMIT 1""",
            (late_message, world.tenant_id),
        )
        after = await send_message(client, alice, bob, {"text": "after"})
        await ingester.run_once()
        late.commit()
    await ingester.run_once()
    rows = await backend_of(gw).select(
        """SELECT toString(message_id) AS m FROM agentbus.events
            WHERE tenant_id = {t:UUID} AND message_id IN {ms:Array(UUID)}""",
        {"t": str(world.tenant_id), "ms": [str(late_message), str(parse_id("msg", after))]},
    )
    assert {r["m"] for r in rows} == {str(late_message), str(parse_id("msg", after))}


async def test_a_transaction_open_in_another_database_holds_nothing_back(
    served: tuple[Gateway, httpx.AsyncClient], agentbus_db: str
) -> None:
    gw, client = served
    world, alice, bob = await alice_and_bob(gw, client)
    elsewhere = psycopg.conninfo.make_conninfo(agentbus_db, dbname="postgres")
    with psycopg.connect(elsewhere) as other:
        other.execute("SELECT pg_current_xact_id()")  # holds a transaction id until it ends
        msg = await send_message(client, alice, bob, {"text": "not held"})
        await Ingester(gw.pool, backend_of(gw)).run_once()
    rows = await backend_of(gw).select(
        """SELECT event FROM agentbus.events
            WHERE tenant_id = {t:UUID} AND message_id = {m:UUID}""",
        {"t": str(world.tenant_id), "m": str(parse_id("msg", msg))},
    )
    assert "message.accepted" in {r["event"] for r in rows}


async def test_the_pass_probes_each_tenant_past_its_cursor_only(
    served: tuple[Gateway, httpx.AsyncClient], agentbus_db: str
) -> None:
    """Finding the tenants with events to send reads the index from each cursor on, not every
    event a tenant ever had: row security keeps an expression over the cursor out of the index
    condition, and the probe then read all of them."""
    gw, client = served
    world, alice, bob = await alice_and_bob(gw, client)
    await send_message(client, alice, bob, {"text": "history"})
    with psycopg.connect(agentbus_db, autocommit=True) as admin:
        admin.execute(
            """INSERT INTO events (event, tenant_id, workspace_id, message_id, conversation_id,
                                   trace_id, span_id, from_agent_id, type, actor, payload_bytes)
               SELECT 'message.fetched', tenant_id, workspace_id, message_id, conversation_id,
                      trace_id, span_id, from_agent_id, type, 'gateway', payload_bytes
                 FROM events, generate_series(1, 500)
                WHERE tenant_id = %s AND event = 'message.accepted'""",
            (world.tenant_id,),
        )
        await Ingester(gw.pool, backend_of(gw)).run_once()  # every cursor after its events

        def rows_read() -> int:
            """Rows of events read so far, by sequential scans and through its indexes."""
            admin.execute("SELECT pg_stat_force_next_flush()")
            [(n,)] = admin.execute(
                """SELECT t.seq_tup_read + (SELECT sum(i.idx_tup_read) FROM pg_stat_user_indexes i
                                             WHERE i.relid = t.relid)
                     FROM pg_stat_user_tables t WHERE t.relname = 'events'"""
            ).fetchall()
            return int(n)

        before = rows_read()
        admin.execute("SET ROLE agentbus_app")  # as the gateway, in this session for its counts
        found = admin.execute(
            "SELECT * FROM analytics_event_tenants(%s)", (history.NEVER,)
        ).fetchall()
        admin.execute("RESET ROLE")
        assert found == []
        assert rows_read() - before < 50  # a handful of tenants, none with anything to send


async def test_a_backlog_is_drained_by_the_next_gateway(
    gateway_settings: GatewaySettings, chdb_dir: Path
) -> None:
    async with serving(gateway_settings) as (app, client):  # analytics off: rows stay queued
        gw: Gateway = app.state.gateway
        world, alice, bob = await alice_and_bob(gw, client)
        msg = await send_message(client, alice, bob, {"text": "later"})
    settings = gateway_settings.model_copy(
        update={
            "analytics": True,
            "analytics_dir": chdb_dir,
            "background": True,
            "analytics_flush_s": 0.2,
        }
    )
    async with serving(settings) as (app, _client):
        gw = app.state.gateway
        deadline = time.monotonic() + 60
        rows: list[Json] = []
        while time.monotonic() < deadline and not rows:
            rows = await backend_of(gw).select(
                """SELECT event FROM agentbus.events
                    WHERE tenant_id = {t:UUID} AND message_id = {m:UUID}""",
                {"t": str(world.tenant_id), "m": str(parse_id("msg", msg))},
            )
            await asyncio.sleep(0.2)
        assert "message.accepted" in {r["event"] for r in rows}


async def test_the_price_list_is_copied(served: tuple[Gateway, httpx.AsyncClient]) -> None:
    gw, _client = served
    await Ingester(gw.pool, backend_of(gw)).run_once()
    [row] = await backend_of(gw).select(
        """SELECT toString(input_per_mtok) AS input FROM agentbus.model_pricing FINAL
            WHERE provider = 'anthropic' AND model = 'claude-opus-4-5'"""
    )
    assert row["input"] == "5"


async def test_the_analytics_api_answers_each_tenant_its_own(
    served: tuple[Gateway, httpx.AsyncClient],
) -> None:
    gw, client = served
    world, alice, bob = await alice_and_bob(gw, client)
    other = await make_world(gw, "globex")
    env = alice.envelope(bob.address, {"text": "hello"})
    await post_envelope(client, alice, env)
    await Ingester(gw.pool, backend_of(gw)).run_once()
    mine = await owner_token(gw, world, ["read_audit"])
    theirs = await owner_token(gw, other, ["admin"])
    path = f"/v1/analytics/conversations/{env['conversation']}/trace"

    reply = await client.get(path, headers=mine)
    assert reply.status_code == 200, reply.text
    [hop] = reply.json()["hops"]
    assert hop["message_id"] == env["id"]
    assert hop["from_agent_id"] == alice.agent_id
    assert [e["event"] for e in hop["events"]][:2] == ["message.accepted", "message.published"]

    reply = await client.get(path, headers=theirs)
    assert reply.status_code == 404
    assert reply.json()["code"] == "AB-8002"
    graph = (await client.get("/v1/analytics/graph", headers=mine)).json()
    assert [(e["source"], e["target"]) for e in graph["edges"]] == [(alice.agent_id, bob.agent_id)]
    for route in ("/v1/analytics/graph", "/v1/analytics/cost", "/v1/analytics/latency"):
        answer = (await client.get(route, headers=theirs)).json()
        assert answer.get("edges", []) == answer.get("rows", []) == [], route
        assert all(s["count"] == 0 for s in answer.get("stages", [])), route
    latency = (await client.get("/v1/analytics/latency?slo_ms=60000", headers=mine)).json()
    assert latency["stages"][0]["count"] == 1

    narrow = await owner_token(gw, world, ["send"])
    assert (await client.get(path, headers=narrow)).status_code == 403
    assert (await client.get(path, headers=alice.headers())).status_code in (401, 403)
    bad = await client.get("/v1/analytics/cost?by=colour", headers=mine)
    assert bad.status_code == 422
