"""``z4j bench trends``: the trends API over a project with millions of tasks, with and without
the index that serves it.

Loads N finished tasks spread over 30 days (as ``z4j bench query`` does), signs in and times
``GET /api/v1/projects/{id}/trends`` for each window, for all tasks and for one task name or
queue; then drops ``tasks_project_finished`` and times the same cases again, so the two runs
print side by side.
"""

from __future__ import annotations

import statistics
from typing import Any

import psycopg

from z4j.bench.harness import pct, timed
from z4j.bench.query import NAMES, QUEUES, loaded_project

CASES: dict[str, dict[str, str]] = {
    "1h": {"window": "1h"},
    "24h": {"window": "24h"},
    "24h+name": {"window": "24h", "name": NAMES[7]},
    "7d+queue": {"window": "7d", "queue": QUEUES[2]},
    "30d": {"window": "30d"},
}


async def run(tasks: int, requests: int, database_url: str | None) -> list[dict[str, Any]]:
    results: list[dict[str, Any]] = []
    async with loaded_project(database_url, tasks, request_timeout=120) as loaded:
        url = f"/api/v1/projects/{loaded.project}/trends"
        for variant in ("with_index", "without_index"):
            if variant == "without_index":
                with psycopg.connect(loaded.server.admin_url, autocommit=True) as conn:
                    conn.execute("DROP INDEX tasks_project_finished")
                    conn.execute("ANALYZE tasks")
            for case, params in CASES.items():
                times, resp = await timed(loaded.client, url, params, requests)
                results.append(
                    {
                        "benchmark": "z4j.trends",
                        "variant": variant,
                        "case": case,
                        "tasks": tasks,
                        "requests": requests,
                        "finished_in_window": resp.json()["finished"],
                        "p50_ms": pct(times, 0.5),
                        "p95_ms": pct(times, 0.95),
                        "mean_ms": round(statistics.mean(times) * 1000, 2),
                    }
                )
    return results
