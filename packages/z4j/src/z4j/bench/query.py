"""``z4j bench query``: the task-list API over a project with millions of tasks.

Loads N tasks straight into PostgreSQL (generate_series, in chunks, with progress on stderr),
then signs in like a person and times ``GET /api/v1/projects/{id}/tasks`` with the filters the
dashboard offers: no filter, by state, by name, by queue and state, a recent time range, the
second page by cursor, and a search in args within the last day.
"""

from __future__ import annotations

import contextlib
import statistics
import sys
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
import psycopg

from z4j.bench.harness import bench_brain, pct, timed
from z4j.testing import BrainProcess

EMAIL, PASSWORD = "bench@example.com", "bench-password-1"
NAMES = [f"app.tasks.job_{i:02d}" for i in range(50)]
QUEUES = ["default", "emails", "reports", "billing", "media"]

_LOAD = """
INSERT INTO tasks (id, project_id, agent_id, engine, engine_task_id, name, queue, state, state_at,
                   args_redacted, kwargs_redacted, enqueued_at, started_at, finished_at,
                   created_at, updated_at, worker, runtime_ms)
SELECT gen_random_uuid(), %(project)s, %(agent)s, 'celery', 'bench-' || g,
       (%(names)s::text[])[1 + (g * 7919) %% 50], (%(queues)s::text[])[1 + (g * 104729) %% 5],
       (CASE WHEN g %% 100 < 80 THEN 'succeeded' WHEN g %% 100 < 85 THEN 'failed'
             WHEN g %% 100 < 88 THEN 'started' WHEN g %% 100 < 98 THEN 'pending'
             ELSE 'retried' END)::task_state,
       t, jsonb_build_array(g, 'order-' || g), jsonb_build_object('customer', 'c-' || (g %% 9973)),
       t, t, t, t, t, 'celery@bench', 12.5
FROM generate_series(%(lo)s::bigint, %(hi)s::bigint) AS g,
     LATERAL (SELECT now() - ((%(total)s - g) * interval '1 second' * %(spread)s)) AS ts(t)
"""


def load(
    admin_url: str, project: uuid.UUID, agent: uuid.UUID, n: int, chunk: int = 250_000
) -> float:
    began = time.perf_counter()
    spread = 30 * 86400 / max(n, 1)  # the tasks span the last 30 days
    with psycopg.connect(admin_url, autocommit=True) as conn:
        for lo in range(1, n + 1, chunk):
            hi = min(n, lo + chunk - 1)
            conn.execute(
                _LOAD,
                {
                    "project": project,
                    "agent": agent,
                    "names": NAMES,
                    "queues": QUEUES,
                    "lo": lo,
                    "hi": hi,
                    "total": n,
                    "spread": spread,
                },
            )
            print(f"loaded {hi:,}/{n:,} tasks", file=sys.stderr, flush=True)
        conn.execute("VACUUM ANALYZE tasks")
    return time.perf_counter() - began


SEARCH_CASE = "search_args_last_day"


def _cases(tasks: int) -> dict[str, dict[str, Any]]:
    return {
        "all": {},
        "state=failed": {"state": "failed"},
        "name": {"name": NAMES[7]},
        "queue+state": {"queue": "emails", "state": "succeeded"},
        "last_hour": {"since": _ago(3600)},
        SEARCH_CASE: {"q": f"order-{max(tasks - 17, 1)}", "since": _ago(86400)},
    }


def _ago(seconds: int) -> str:
    from datetime import UTC, datetime, timedelta

    return (datetime.now(UTC) - timedelta(seconds=seconds)).isoformat()


@dataclass(frozen=True)
class Loaded:
    """A brain whose one project holds the loaded tasks, and a client signed in to it."""

    server: BrainProcess
    client: httpx.AsyncClient
    project: uuid.UUID
    load_seconds: float


@contextlib.asynccontextmanager
async def loaded_project(
    database_url: str | None, tasks: int, request_timeout: float
) -> AsyncIterator[Loaded]:
    """A fresh brain with ``tasks`` tasks loaded into one project, and a client signed in as
    the admin made a viewer of that project."""
    async with bench_brain(
        database_url, env={"Z4J_ADMIN_EMAIL": EMAIL, "Z4J_ADMIN_PASSWORD": PASSWORD}
    ) as server:
        creds = await server.new_agent("bench")
        project = creds["project_id"]
        with psycopg.connect(server.admin_url, autocommit=True) as conn:
            conn.execute(
                "INSERT INTO memberships (id, user_id, project_id, role) "
                "SELECT gen_random_uuid(), id, %s, 'viewer' FROM users",
                (project,),
            )
        load_seconds = load(server.admin_url, project, creds["agent_id"], tasks)
        async with httpx.AsyncClient(base_url=server.url, timeout=request_timeout) as client:
            r = await client.post("/api/v1/auth/login", json={"email": EMAIL, "password": PASSWORD})
            r.raise_for_status()
            yield Loaded(server, client, project, load_seconds)


async def run(tasks: int, requests: int, database_url: str | None) -> list[dict[str, Any]]:
    results: list[dict[str, Any]] = []
    async with loaded_project(database_url, tasks, request_timeout=30) as loaded:
        client, load_seconds = loaded.client, loaded.load_seconds
        url = f"/api/v1/projects/{loaded.project}/tasks"
        all_times: list[float] = []
        cases = _cases(tasks)
        first = (await client.get(url, params={"limit": 50})).json()
        cases["page2_cursor"] = {"cursor": first.get("next_cursor") or ""}
        for name, params in cases.items():
            times, resp = await timed(client, url, {"limit": 50, **params}, requests)
            if name != SEARCH_CASE:  # a full-text scan of a day; reported on its own
                all_times += times
            results.append(
                {
                    "benchmark": "z4j.query",
                    "case": name,
                    "tasks": tasks,
                    "requests": requests,
                    "p50_ms": pct(times, 0.5),
                    "p95_ms": pct(times, 0.95),
                    "p99_ms": pct(times, 0.99),
                    "mean_ms": round(statistics.mean(times) * 1000, 2),
                    "rows": len(resp.json().get("items", [])),
                }
            )
        results.append(
            {
                "benchmark": "z4j.query",
                "case": "overall_filters",
                "excludes": SEARCH_CASE,
                "tasks": tasks,
                "requests": len(all_times),
                "p50_ms": pct(all_times, 0.5),
                "p95_ms": pct(all_times, 0.95),
                "p99_ms": pct(all_times, 0.99),
                "load_seconds": round(load_seconds, 1),
                "unit": "ms",
                "path": "HTTP GET task list (session cookie) -> PostgreSQL",
            }
        )
    return results
