"""The task list's cost: a fixed number of statements per page, and index walks that read
about one page of rows however large the project is."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from psycopg import sql
from z4j.brain import Brain
from z4j.store.tasks_read import Cursor, TaskFilters, list_query

from .conftest import Seed


@pytest.fixture
def statements(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every statement the app sends through a psycopg cursor while the test runs."""
    seen: list[str] = []
    original = psycopg.AsyncCursor.execute

    async def counting(self: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
        seen.append(query if isinstance(query, str) else repr(query))
        return await original(self, query, *args, **kwargs)

    monkeypatch.setattr(psycopg.AsyncCursor, "execute", counting)
    return seen


async def test_a_page_costs_four_statements_whatever_its_size(
    seed: Seed, statements: list[str]
) -> None:
    owner = await seed.user("own@example.com")
    project = await seed.project(owner)
    agent = await seed.agent(owner, project)
    seed.tasks(
        project,
        [{"agent_id": agent.agent["id"], "state": ["failed", "lost"][i % 2]} for i in range(300)],
    )
    url = f"/api/v1/projects/{project}/tasks"
    async with seed.signed_in("own@example.com") as http:
        await http.get(url)  # warm the pool's connections
        counts = {}
        for params in (
            {"limit": 5},
            {"limit": 200},
            {"limit": 200, "state": ["failed", "lost"]},
            {"limit": 50, "name": "app.*", "queue": "celery"},
        ):
            statements.clear()
            response = await http.get(url, params=params)
            assert response.status_code == 200
            counts[json.dumps(params)] = len(statements)
    # session lookup, set project scope, membership check, the page itself
    assert set(counts.values()) == {4}, counts


def _plan_nodes(plan: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield plan
    for child in plan.get("Plans", []):
        yield from _plan_nodes(child)


BIG = 200_000


@pytest.fixture
def big_project(z4j_database: str) -> uuid.UUID:
    owner_project = uuid.uuid4()
    with psycopg.connect(z4j_database) as conn:
        conn.execute(
            "INSERT INTO projects (id, name) VALUES (%s, 'big'), (%s, 'other')",
            (owner_project, uuid.uuid4()),
        )
        conn.execute(
            """INSERT INTO tasks (id, project_id, engine, name, queue, state, created_at,
                   enqueued_at, args_redacted)
               SELECT gen_random_uuid(), p.id, 'celery', 'app.task' || (g %% 50), 'q' || (g %% 7),
                   (ARRAY['pending','started','succeeded','failed','cancelled','retried',
                          'lost'])[1 + g %% 7]::task_state,
                   now() - make_interval(secs => g), now() - make_interval(secs => g),
                   jsonb_build_array(g)
               FROM generate_series(1, %s) g CROSS JOIN projects p""",
            (BIG // 2,),
        )
        conn.execute("ANALYZE tasks")
    return owner_project


PLANS = {
    "newest": TaskFilters(),
    "state": TaskFilters(states=("failed",)),
    "states": TaskFilters(states=("failed", "lost", "started")),
    "name": TaskFilters(name="app.task7"),
    "name prefix": TaskFilters(name="app.task4*"),
    "search": TaskFilters(q="7", since=datetime.now(UTC) - timedelta(days=7)),
    "queue": TaskFilters(queue="q3"),
    "state and queue": TaskFilters(states=("succeeded",), queue="q2"),
    "created window": TaskFilters(
        since=datetime.now(UTC) - timedelta(hours=5), until=datetime.now(UTC) - timedelta(hours=4)
    ),
}


async def test_pages_walk_an_index_and_stop(brain: Brain, big_project: uuid.UUID) -> None:
    limit = 50
    cursor = Cursor(datetime.now(UTC) - timedelta(hours=1), uuid.uuid4())
    for case, position in ((c, p) for c in PLANS for p in (None, cursor)):
        query, params = list_query(big_project, PLANS[case], position, limit)
        async with brain.project_tx(big_project) as conn:
            cur = await conn.execute(sql.SQL("EXPLAIN (ANALYZE, FORMAT JSON) ") + query, params)
            row = await cur.fetchone()
        assert row is not None
        plan = row["QUERY PLAN"][0]["Plan"]
        nodes = list(_plan_nodes(plan))
        scans = [n for n in nodes if n.get("Relation Name") == "tasks"]
        assert scans, (case, [n["Node Type"] for n in scans])
        assert all(n["Node Type"] in ("Index Scan", "Index Only Scan") for n in scans), (
            case,
            [n["Node Type"] for n in scans],
        )
        # Each branch stops after about a page: the planner may walk the newest-first index
        # and filter a common value (1 in 7 here), but never sorts the project's 100,000 rows.
        for scan in scans:
            read = scan["Actual Rows"] + scan.get("Rows Removed by Filter", 0)
            assert read <= 10 * (limit + 1), (case, scan["Index Name"], read)
