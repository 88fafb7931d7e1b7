"""The job runner against real PostgreSQL, logged in as the non-superuser app role."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any
from uuid import UUID

import pytest
from fastapi import FastAPI
from platformkit.db.migrator import Migration, Migrator, Source
from platformkit.db.pool import open_pool, with_user
from platformkit.db.roles import RoleSpec
from platformkit.db.scope import Pool, transaction
from platformkit.jobs import (
    JobRunner,
    JobsError,
    RetryStrategy,
    Task,
    TaskContext,
    absurd_source,
)
from platformkit.testing.databases import DatabaseFactory

QUEUE = "work"
NOW: RetryStrategy = {"kind": "fixed", "base_seconds": 0}


def runner_for(pool: Pool, *tasks: Task) -> JobRunner:
    return JobRunner(pool, QUEUE, tasks, concurrency=2, poll_interval=0.05)


def migrator() -> Migrator:
    queue = Source("jobs", [Migration(1, "queue", f"SELECT absurd.create_queue('{QUEUE}');\n")])
    return Migrator("jobs", [absurd_source(), queue], RoleSpec(owner="jobs_owner", app="jobs_app"))


@pytest.fixture
async def pool(database_factory: DatabaseFactory) -> AsyncIterator[Pool]:
    """A pool logged in as ``jobs_app`` on a database cloned from a migrated template."""
    template = await database_factory.template("jobs", migrator().migrate)
    url = database_factory.create(template=template, stem="jobs")
    app_pool = await open_pool(with_user(url, "jobs_app"), max_size=6)
    try:
        yield app_pool
    finally:
        await app_pool.close()
        database_factory.drop(url)


async def state_of(pool: Pool, task_id: UUID) -> dict[str, Any]:
    async with pool.connection() as conn:
        cur = await conn.execute(
            "SELECT r.state, r.result, t.attempts FROM absurd.get_task_result(%s, %s) r"
            " JOIN absurd.t_work t ON t.task_id = %s",
            (QUEUE, task_id, task_id),
        )
        row = await cur.fetchone()
    assert row is not None
    return row


async def until_done(pool: Pool, task_id: UUID, within: float = 5.0) -> dict[str, Any]:
    deadline = time.monotonic() + within
    while True:
        row = await state_of(pool, task_id)
        if row["state"] in ("completed", "failed", "cancelled") or time.monotonic() > deadline:
            return row
        await asyncio.sleep(0.02)


async def test_runs_as_a_non_superuser(pool: Pool) -> None:
    async with pool.connection() as conn:
        cur = await conn.execute("SELECT rolsuper FROM pg_roles WHERE rolname = current_user")
        assert await cur.fetchone() == {"rolsuper": False}


async def test_spawned_task_runs_and_steps_survive_a_retry(pool: Pool) -> None:
    calls = {"runs": 0, "charged": 0}

    async def charge(params: Any, ctx: TaskContext) -> Any:
        calls["runs"] += 1

        async def once() -> str:
            calls["charged"] += params["amount"]
            return "receipt-1"

        receipt = await ctx.step("charge", once)
        if calls["runs"] == 1:
            raise RuntimeError("mail server down")  # after the checkpoint: attempt 2 resumes
        return {"receipt": receipt}

    async with runner_for(pool, Task("charge", charge, retry=NOW)) as runner:
        async with transaction(pool) as conn:
            spawned = await runner.spawn(conn, "charge", {"amount": 7})
        row = await until_done(pool, spawned.task_id)
    assert (row["state"], row["result"], row["attempts"]) == (
        "completed",
        {"receipt": "receipt-1"},
        2,
    )
    assert calls == {"runs": 2, "charged": 7}  # the checkpointed step did not run again


async def test_failing_task_is_retried_up_to_max_attempts(pool: Pool) -> None:
    attempts: list[float] = []

    async def flaky(params: Any, ctx: TaskContext) -> Any:
        attempts.append(time.monotonic())
        if len(attempts) < params["succeed_on"]:
            raise RuntimeError(f"attempt {len(attempts)} fails")
        return len(attempts)

    backoff: RetryStrategy = {"kind": "fixed", "base_seconds": 0.2}
    async with runner_for(pool, Task("flaky", flaky, max_attempts=3, retry=backoff)) as runner:
        async with transaction(pool) as conn:
            ok = await runner.spawn(conn, "flaky", {"succeed_on": 2})
        done = await until_done(pool, ok.task_id)
        assert (done["state"], done["result"], done["attempts"]) == ("completed", 2, 2)
        assert attempts[1] - attempts[0] >= 0.2  # absurd held the retry back for the backoff

        attempts.clear()
        async with transaction(pool) as conn:
            bad = await runner.spawn(conn, "flaky", {"succeed_on": 99}, retry=NOW)
        failed = await until_done(pool, bad.task_id)
    assert (failed["state"], failed["attempts"], len(attempts)) == ("failed", 3, 3)


async def test_spawn_is_visible_only_after_commit_and_gone_on_rollback(pool: Pool) -> None:
    seen: list[str] = []

    async def record(params: Any, ctx: TaskContext) -> None:
        seen.append(params["tag"])

    async with runner_for(pool, Task("record", record)) as runner:

        async def action_that_fails() -> None:
            async with transaction(pool) as conn:
                await runner.spawn(conn, "record", {"tag": "rolled back"})
                raise RuntimeError("abort the action")

        with pytest.raises(RuntimeError, match="abort"):
            await action_that_fails()
        async with transaction(pool) as conn:
            pending = await runner.spawn(conn, "record", {"tag": "committed"})
            await asyncio.sleep(0.3)  # several polls while the transaction is still open
            assert seen == []
        assert (await until_done(pool, pending.task_id))["state"] == "completed"
        await asyncio.sleep(0.2)
    assert seen == ["committed"]
    async with pool.connection() as conn:
        cur = await conn.execute("SELECT count(*) AS n FROM absurd.t_work")
        assert await cur.fetchone() == {"n": 1}


async def test_idempotency_key_queues_once(pool: Pool) -> None:
    async def noop(params: Any, ctx: TaskContext) -> None:
        return None

    runner = JobRunner(pool, QUEUE, [Task("noop", noop)])
    async with transaction(pool) as conn:
        first = await runner.spawn(conn, "noop", {}, idempotency_key="order:1")
        second = await runner.spawn(conn, "noop", {}, idempotency_key="order:1")
    assert first.task_id == second.task_id
    with pytest.raises(JobsError, match="not registered"):
        async with transaction(pool) as conn:
            await runner.spawn(conn, "nope", {})


async def test_stop_waits_for_in_flight_tasks(pool: Pool) -> None:
    started, finished = asyncio.Event(), asyncio.Event()

    async def slow(params: Any, ctx: TaskContext) -> str:
        started.set()
        await asyncio.sleep(0.5)
        finished.set()
        return "done"

    runner = runner_for(pool, Task("slow", slow))
    await runner.start()
    async with transaction(pool) as conn:
        spawned = await runner.spawn(conn, "slow", {})
    await asyncio.wait_for(started.wait(), 5)
    assert runner.in_flight == 1
    assert await runner.stop(grace=5) is True
    assert finished.is_set()
    assert runner.in_flight == 0
    assert not runner.running
    assert (await state_of(pool, spawned.task_id))["state"] == "completed"


async def test_missing_queue_is_reported_at_start(pool: Pool) -> None:
    with pytest.raises(JobsError, match="create_queue"):
        await JobRunner(pool, "elsewhere").start()


async def test_runner_lives_in_a_fastapi_lifespan(pool: Pool) -> None:
    done = asyncio.Event()

    async def notify(params: Any, ctx: TaskContext) -> None:
        done.set()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with runner_for(pool, Task("notify", notify)) as runner:
            app.state.jobs = runner
            yield

    app = FastAPI(lifespan=lifespan)
    async with app.router.lifespan_context(app):
        runner: JobRunner = app.state.jobs
        assert runner.running
        async with transaction(pool) as conn:
            await runner.spawn(conn, "notify", {})
        await asyncio.wait_for(done.wait(), 5)
    assert not runner.running
