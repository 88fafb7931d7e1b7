"""``agentbus-gateway bench-analytics`` on a small load against the PostgreSQL server it is
given: every queued event is drained, both lines are printed with their figures, and the bench
database is dropped afterwards."""

from __future__ import annotations

import asyncio
from typing import Any

import psycopg
from agentbus.bench.analytics import bench_analytics


async def test_the_bench_drains_every_event_and_cleans_up(pg_admin_url: str) -> None:
    rows: list[dict[str, Any]] = []
    await asyncio.to_thread(bench_analytics, 3000, 1000, pg_admin_url, rows.append)
    ingest, insert = rows
    assert (ingest["bench"], ingest["events"], ingest["batch"]) == ("analytics_ingest", 3000, 1000)
    assert ingest["events_per_s"] > 0
    assert ingest["ingest_cpu_us_per_event"] > 0
    assert (insert["bench"], insert["events"]) == ("chdb_insert", 3000)
    with psycopg.connect(pg_admin_url) as conn:
        names = [r[0] for r in conn.execute("SELECT datname FROM pg_database").fetchall()]
    assert not [n for n in names if n.startswith("agentbus_bench_")]
