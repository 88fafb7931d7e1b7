"""The SQL upsert applies the same rule as the Python fold, whatever the batch boundaries."""

from __future__ import annotations

import random
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from platformkit.db.pool import open_pool
from platformkit.db.scope import tenant_transaction
from z4j.db import SCOPE
from z4j.domain.taskstate import RANK, TaskState
from z4j.ingest.fold import fold_batch
from z4j.store.ingest import write_folded

T0 = datetime(2026, 1, 1, tzinfo=UTC)
KINDS = [
    "task.sent",
    "task.received",
    "task.started",
    "task.succeeded",
    "task.failed",
    "task.retried",
    "task.revoked",
]


def random_events(rnd: random.Random, n: int) -> list[dict[str, Any]]:
    return [
        {
            "id": f"e{i}",
            "kind": rnd.choice(KINDS),
            "task_id": f"t{rnd.randint(0, 4)}",
            "occurred_at": (T0 + timedelta(seconds=rnd.randint(0, 6))).isoformat(),
            "data": {"task_name": "x", "queue": "q", "exception": "E: m"},
        }
        for i in range(n)
    ]


async def _state_rows(url: str, project: uuid.UUID) -> list[tuple[Any, ...]]:
    with psycopg.connect(url) as conn:
        return conn.execute(
            "SELECT engine_task_id, state::text, state_at, enqueued_at, started_at, finished_at "
            "FROM tasks WHERE project_id = %s ORDER BY engine_task_id",
            (project,),
        ).fetchall()


async def test_sql_ranks_match_python(brain_database: str) -> None:
    with psycopg.connect(brain_database) as conn:
        for state in TaskState:
            row = conn.execute("SELECT z4j_state_rank(%s::task_state)", (state.value,)).fetchone()
            assert row == (RANK[state],)


@pytest.mark.parametrize("seed", range(5))
async def test_any_batching_gives_the_same_tasks(brain_database: str, seed: int) -> None:
    rnd = random.Random(seed)
    events = random_events(rnd, 40)
    one, many = uuid.uuid4(), uuid.uuid4()
    pool = await open_pool(brain_database, min_size=1, max_size=2)
    try:
        async with pool.connection() as conn:
            for p in (one, many):
                await conn.execute("INSERT INTO projects (id, name) VALUES (%s, %s)", (p, str(p)))
        async with tenant_transaction(pool, SCOPE, one) as conn:
            await write_folded(conn, one, None, fold_batch(one, events))
        shuffled = events[:]
        rnd.shuffle(shuffled)
        for start in range(0, len(shuffled), 7):
            chunk = shuffled[start : start + 7] * 2  # and every event twice
            async with tenant_transaction(pool, SCOPE, many) as conn:
                await write_folded(conn, many, None, fold_batch(many, chunk))
    finally:
        await pool.close()
    assert await _state_rows(brain_database, one) == await _state_rows(brain_database, many)
    with psycopg.connect(brain_database) as conn:
        counts = conn.execute(
            "SELECT project_id = %s, count(*) FROM events GROUP BY 1 ORDER BY 1", (one,)
        ).fetchall()
    assert counts[0][1] == counts[1][1]  # duplicates stored once


async def test_integers_beyond_64_bits_are_stored_exactly(brain_database: str) -> None:
    project, huge = uuid.uuid4(), 10**30
    event = {
        "id": "e-huge",
        "kind": "task.sent",
        "task_id": "t-huge",
        "occurred_at": T0.isoformat(),
        "data": {"task_name": "x", "args": [huge], "kwargs": {"n": -huge}},
    }
    pool = await open_pool(brain_database, min_size=1, max_size=1)
    try:
        async with pool.connection() as conn:
            await conn.execute("INSERT INTO projects (id, name) VALUES (%s, 'p')", (project,))
        async with tenant_transaction(pool, SCOPE, project) as conn:
            await write_folded(conn, project, None, fold_batch(project, [event]))
    finally:
        await pool.close()
    with psycopg.connect(brain_database) as conn:
        task = conn.execute(
            "SELECT args_redacted, kwargs_redacted FROM tasks WHERE project_id = %s", (project,)
        ).fetchone()
        payload = conn.execute(
            "SELECT payload -> 'args' FROM events WHERE project_id = %s", (project,)
        ).fetchone()
    assert task == ([huge], {"n": -huge})
    assert payload == ([huge],)


async def test_deleting_a_project_deletes_its_tasks_and_events(brain_database: str) -> None:
    # events.project_id has no foreign key of its own: the task's cascade removes them.
    project, other = uuid.uuid4(), uuid.uuid4()
    events = random_events(random.Random(7), 12)
    pool = await open_pool(brain_database, min_size=1, max_size=1)
    try:
        async with pool.connection() as conn:
            for p in (project, other):
                await conn.execute("INSERT INTO projects (id, name) VALUES (%s, %s)", (p, str(p)))
        for p in (project, other):
            async with tenant_transaction(pool, SCOPE, p) as conn:
                await write_folded(conn, p, None, fold_batch(p, events))
    finally:
        await pool.close()
    with psycopg.connect(brain_database) as conn:
        conn.execute("DELETE FROM projects WHERE id = %s", (project,))
        left = conn.execute(
            "SELECT (SELECT count(*) FROM tasks WHERE project_id = %s),"
            " (SELECT count(*) FROM events WHERE project_id = %s),"
            " (SELECT count(*) FROM events WHERE project_id = %s)",
            (project, project, other),
        ).fetchone()
    assert left is not None
    assert left[:2] == (0, 0)
    assert left[2] > 0
