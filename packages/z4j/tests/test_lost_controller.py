"""The lost-task sweep with two brain replicas on one database: one leads (an advisory lock),
and whatever runs, each lost task gets one transition and one timeline row."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import psycopg
import pytest
from z4j import db
from z4j.brain import Brain
from z4j.controllers.lost import lost_tasks_loop, sweep_once
from z4j.settings import Settings
from z4j.startup import open_brain, prepare
from z4j.testing import wait_for

TASKS = 40


@pytest.fixture
async def two_brains(z4j_database: str, tmp_path: Path) -> AsyncIterator[tuple[Brain, Brain]]:
    settings = Settings(
        database_url=z4j_database,
        config_dir=tmp_path / "config",
        lost_after_seconds=1,
        lost_sweep_seconds=0.2,
    )
    prepared = await prepare(settings)
    first, second = await open_brain(prepared, max_size=4), await open_brain(prepared, max_size=4)
    yield first, second
    await first.pool.close()
    await second.pool.close()


def seed_started_tasks(admin_url: str, silent: bool) -> list[uuid.UUID]:
    project, agent = uuid.uuid4(), uuid.uuid4()
    seen = "now() - interval '1 hour'" if silent else "now()"
    ids = [uuid.uuid4() for _ in range(TASKS)]
    with psycopg.connect(admin_url) as conn:
        conn.execute("INSERT INTO projects (id, name) VALUES (%s, %s)", (project, project.hex))
        conn.execute(
            "INSERT INTO agents (id, project_id, name, token_hash, state, last_seen_at) "
            f"VALUES (%s, %s, 'a', %s, 'online', {seen})",
            (agent, project, agent.hex),
        )
        for i, task in enumerate(ids):
            conn.execute(
                "INSERT INTO tasks (id, project_id, agent_id, engine, engine_task_id, state, "
                "state_at, state_attempt) VALUES (%s, %s, %s, 'celery', %s, 'started', now(), 0)",
                (task, project, agent, f"t{i}"),
            )
    return ids


def lost_rows(admin_url: str, ids: list[uuid.UUID]) -> tuple[int, int]:
    with psycopg.connect(admin_url) as conn:
        tasks = conn.execute(
            "SELECT count(*) FROM tasks WHERE id = ANY(%s) AND state = 'lost'", (ids,)
        ).fetchone()
        events = conn.execute(
            "SELECT count(*) FROM events WHERE task_id = ANY(%s) AND event_type = 'lost'", (ids,)
        ).fetchone()
    assert tasks is not None
    assert events is not None
    return tasks[0], events[0]


async def test_two_replicas_lose_each_task_once(
    two_brains: tuple[Brain, Brain], z4j_database: str
) -> None:
    ids = seed_started_tasks(z4j_database, silent=True)
    kept = seed_started_tasks(z4j_database, silent=False)
    url = db.app_url(z4j_database, two_brains[0].secrets)
    loops = [lost_tasks_loop(b, url) for b in two_brains]
    async with loops[0], loops[1]:

        async def done() -> bool:
            return lost_rows(z4j_database, ids)[0] == TASKS

        assert await wait_for(done, within=60)
        leaders = [loop.is_leader for loop in loops]
        assert leaders.count(True) == 1, leaders
    assert lost_rows(z4j_database, ids) == (TASKS, TASKS)
    assert lost_rows(z4j_database, kept) == (0, 0)


async def test_sweeps_racing_without_the_lock_still_act_once(
    two_brains: tuple[Brain, Brain], z4j_database: str
) -> None:
    ids = seed_started_tasks(z4j_database, silent=True)
    marked = await asyncio.gather(*(sweep_once(b) for b in two_brains for _ in range(2)))
    assert sum(marked) == TASKS
    assert lost_rows(z4j_database, ids) == (TASKS, TASKS)
    assert await sweep_once(two_brains[0]) == 0


async def test_the_sweep_forgets_workers_silent_for_a_day(
    two_brains: tuple[Brain, Brain], z4j_database: str
) -> None:
    seed_started_tasks(z4j_database, silent=False)
    with psycopg.connect(z4j_database) as conn:
        agent = conn.execute("SELECT id, project_id FROM agents").fetchone()
        assert agent is not None
        conn.execute(
            "INSERT INTO agent_workers (agent_id, worker_id, project_id, last_seen_at) VALUES "
            "(%s, 'old', %s, now() - interval '25 hours'), (%s, 'live', %s, now())",
            (agent[0], agent[1], agent[0], agent[1]),
        )
    await sweep_once(two_brains[0])
    with psycopg.connect(z4j_database) as conn:
        left = conn.execute("SELECT worker_id FROM agent_workers").fetchall()
    assert left == [("live",)]
