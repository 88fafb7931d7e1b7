"""``agentbus-gateway bench-analytics``: how fast the analytics outbox drains into chDB, and what
it costs per event.

A throwaway PostgreSQL (or a database created in the one given) is migrated and given a tenant;
``events`` events rows are queued in its outbox as the triggers queue them; then the ingester
drains them into a throwaway chDB, once. Printed, one JSON object per line: the drain's events
per second, the CPU per event of this process (the ingester and chDB, which runs in it) and of
PostgreSQL (reading and deleting the outbox); and the rate of chDB inserts alone (the same rows,
no PostgreSQL) as the ceiling. The CPU the triggers add to each message is what ``bench`` shows
with ``--analytics`` beside ``--no-analytics``.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from typing import Any

import psycopg

from agentbus import db
from agentbus.analytics.backends import ChdbBackend
from agentbus.analytics.ingest import Ingester
from agentbus.analytics.rows import event_row
from agentbus.analytics.store import apply_schema
from agentbus.bench.deploy import Deployment, make_tenant, workdir

Emit = Callable[[dict[str, Any]], None]
TRIGGERS = (
    ("messages", "analytics_messages_inserted"),
    ("messages", "analytics_messages_updated"),
    ("task_transitions", "analytics_task_transitions"),
    ("usage", "analytics_usage_inserted"),
)

# As analytics_message_event builds them (migration 0021), for made-up messages.
_QUEUE = """
INSERT INTO analytics_outbox (tenant_id, target, row)
SELECT %(t)s, 'events', jsonb_build_object(
    'event_id', gen_random_uuid(), 'event_time',
    analytics_ts(now() - (i %% 86400) * interval '1 second'),
    'event', (ARRAY['message.accepted', 'message.published', 'message.delivered',
                    'message.read'])[i %% 4 + 1],
    'tenant_id', %(t)s, 'workspace_id', %(t)s, 'message_id', gen_random_uuid(),
    'conversation_id', gen_random_uuid(), 'task_id', NULL, 'trace_id', md5(i::text),
    'span_id', left(md5(i::text), 16), 'from_agent_id', %(t)s, 'to_agent_id', %(t)s,
    'type', 'agentbus.message.v1', 'capability', NULL, 'attempt', 1, 'actor', 'gateway',
    'payload_bytes', 512, 'latency_ms', i %% 1000, 'error_code', NULL, 'policy_id', NULL,
    'bridged_from', NULL, 'details', '{}'::jsonb)
  FROM generate_series(1, %(n)s) AS i"""


async def set_analytics_triggers(database_url: str, *, enabled: bool) -> None:
    """Turn the outbox triggers of migration 0021 on or off (the baseline of ``bench``)."""
    verb = "ENABLE" if enabled else "DISABLE"
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        for table, trigger in TRIGGERS:
            await conn.execute(f"ALTER TABLE {table} {verb} TRIGGER {trigger}")  # our names


async def _run(dep: Deployment, events: int, batch: int, emit: Emit) -> None:
    tenant_id, _token = await make_tenant(str(dep.database_url), dep.root / "keyring.json")
    async with await psycopg.AsyncConnection.connect(str(dep.database_url)) as conn:
        await conn.execute(_QUEUE, {"t": tenant_id, "n": events})
        await conn.commit()
        rows: list[Any] = await (
            await conn.execute("SELECT row FROM analytics_outbox LIMIT %s", (batch,))
        ).fetchall()
    sample = [event_row(r[0]) for r in rows]
    pool = await db.open_app_pool(str(dep.database_url), max_size=2)
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
