"""``agentbus-gateway bench-analytics``: how fast message events drain from ``events`` into chDB,
and what it costs per event.

A throwaway PostgreSQL (or a database created in the one given) is migrated and given a tenant;
``events`` rows are written as the triggers write them, four steps for each made-up message; then
the ingester drains them into a throwaway chDB, once. Printed, one JSON object per line: the
drain's events per second, the CPU per event of this process (the ingester and chDB, which runs
in it) and of PostgreSQL (reading the events, each with its message's earlier steps, and moving
the cursor); and the rate of chDB inserts alone (the same rows, no PostgreSQL) as the ceiling.
What analytics adds to each message is what ``bench`` shows with ``--analytics`` beside
``--no-analytics``.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from typing import Any

import psycopg
from platformkit.db.scope import tenant_transaction

from agentbus import db
from agentbus.analytics import history
from agentbus.analytics.backends import ChdbBackend
from agentbus.analytics.ingest import Ingester
from agentbus.analytics.rows import event_row
from agentbus.analytics.store import apply_schema
from agentbus.bench.deploy import Deployment, make_tenant, workdir
from agentbus.db import SCOPE

Emit = Callable[[dict[str, Any]], None]
TRIGGERS = (
    ("task_transitions", "analytics_task_transitions"),
    ("usage", "analytics_usage_inserted"),
)

# As the triggers of migration 0016 write them, for made-up messages of four steps each.
_WRITE = """
INSERT INTO events (event_time, event, tenant_id, workspace_id, message_id, conversation_id,
                    trace_id, span_id, from_agent_id, to_agent_id, type, attempt, actor,
                    payload_bytes)
SELECT now() - ((%(n)s - i) * interval '1 millisecond'),
       (ARRAY['message.accepted', 'message.published', 'message.delivered',
              'message.read'])[i %% 4 + 1],
       %(t)s, %(t)s, md5((i / 4)::text)::uuid, md5('c' || (i / 40)::text)::uuid, md5(i::text),
       left(md5(i::text), 16), %(t)s, %(t)s, 'agentbus.message.v1', 1, 'gateway', 512
  FROM generate_series(0, %(n)s - 1) AS i"""


async def set_analytics_triggers(database_url: str, *, enabled: bool) -> None:
    """Turn the outbox triggers of migration 0021 on or off (the baseline of ``bench``)."""
    verb = "ENABLE" if enabled else "DISABLE"
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        for table, trigger in TRIGGERS:
            await conn.execute(f"ALTER TABLE {table} {verb} TRIGGER {trigger}")  # our names


async def _run(dep: Deployment, events: int, batch: int, emit: Emit) -> None:
    tenant_id, _token = await make_tenant(str(dep.database_url), dep.root / "keyring.json")
    async with await psycopg.AsyncConnection.connect(str(dep.database_url)) as conn:
        await conn.execute(_WRITE, {"t": tenant_id, "n": events})
        await conn.commit()
    pool = await db.open_app_pool(str(dep.database_url), max_size=2)
    async with tenant_transaction(pool, SCOPE, tenant_id) as conn:
        rows = await history.take(conn, tenant_id, history.NIL, history.NEVER, batch)
    sample = [event_row(r) for r in rows]
    backend = ChdbBackend(dep.root / "chdb")
    try:
        await apply_schema(backend)
        meter = dep.meter()
        before, cpu0, t0 = meter.take(), time.process_time(), time.perf_counter()
        taken = await Ingester(pool, backend, batch=batch).run_once()
        wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
        after = meter.take()
        postgres = after.get("postgres", 0.0) - before.get("postgres", 0.0)
        emit({"bench": "analytics_ingest", "events": taken, "batch": batch,
              "events_per_s": round(taken / wall), "wall_s": round(wall, 3),
              "ingest_cpu_us_per_event": round(cpu * 1e6 / taken, 2),
              "postgres_cpu_us_per_event": round(postgres * 1e6 / taken, 2),
              "store": "chdb"})  # fmt: skip
        rounds = max(1, events // batch)
        cpu0, t0 = time.process_time(), time.perf_counter()
        for _ in range(rounds):
            await backend.insert("agentbus.events", sample)
        wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
        inserted = rounds * len(sample)
        emit({"bench": "chdb_insert", "events": inserted, "batch": len(sample),
              "events_per_s": round(inserted / wall), "wall_s": round(wall, 3),
              "cpu_us_per_event": round(cpu * 1e6 / inserted, 2), "store": "chdb"})  # fmt: skip
    finally:
        await backend.close()
        await pool.close()


def bench_analytics(
    events: int, batch: int, database_url: str | None = None, emit: Emit | None = None
) -> None:
    out = emit or (lambda row: print(json.dumps(row), flush=True))
    with workdir() as root:
        dep = Deployment(root, database_url, "nats://unused", workers=1)
        try:
            dep.start_services()
            asyncio.run(_run(dep, events, batch, out))
        finally:
            dep.stop()
