"""Commands from the CLI, across a brain restart (a bulk retry's state lives in the database),
to an agent that went away, and through a second brain on the same database."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from platformkit.testing.services import free_port
from z4j.testing import BrainProcess, wait_for

from .command_stack import (
    ADMIN_EMAIL,
    ADMIN_PASSWORD,
    CommandStack,
    Row,
    admin_brain,
    command_stack,
    signed_in,
)
from .workers import stop_worker

pytestmark = pytest.mark.long_module  # minutes: run first (platformkit.testing.plugin)

__all__ = ["admin_brain"]  # the module's brain, a fixture


async def check_bulk_retry_survives_a_brain_restart(stack: CommandStack) -> None:
    for i in range(3):
        await stack.task(stack.app.send_task("cmd.add", (i, 100)).id, "succeeded")
    path = f"/projects/{stack.project}/tasks/bulk-retry?state=succeeded&name=cmd.add"
    preview = await stack.api.post(path, json={"max": 4, "dry_run": True})
    assert preview.status_code == 200, preview.text
    assert preview.json() == {"count": 4, "more": True, "max": 4}
    started = await stack.api.post(path, json={"max": 4})
    assert started.status_code == 202, started.text
    bulk = started.json()
    assert bulk["total"] == 4
    # The brain goes down while the bulk retry runs; its state is in the database.
    stack.brain.stop()
    stack.brain.start()
    async with signed_in(stack.brain.url) as api:

        async def done() -> dict[str, Any] | None:
            got = (await api.get(f"/projects/{stack.project}/bulk-retries/{bulk['id']}")).json()
            return got if got["status"] == "done" else None

        final = await wait_for(done, within=120, interval=0.5)
    assert final is not None, stack.logs()
    assert final["commands"] == {"succeeded": 4}, final
    assert (final["processed"], final["skipped"]) == (4, 0)
    (row,) = await stack.audit("task.bulk_retry")
    assert row["details"]["count"] == 4


def z4j_cli(brain: BrainProcess, *args: str) -> subprocess.CompletedProcess[str]:
    env = os.environ | {"Z4J_URL": brain.url, "Z4J_EMAIL": ADMIN_EMAIL,
                        "Z4J_PASSWORD": ADMIN_PASSWORD}  # fmt: skip
    return subprocess.run(
        [sys.executable, "-m", "z4j.cli", *args],
        env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


@pytest.mark.timeout(180)
async def test_the_cli_retries_and_a_command_to_an_agent_that_went_away_times_out(
    admin_brain: BrainProcess, tmp_path: Path
) -> None:
    async with command_stack(admin_brain, "ours", "redis", tmp_path) as stack:
        done = stack.app.send_task("cmd.add", (1, 2)).id
        task = await stack.task(done, "succeeded")
        ran = await asyncio.to_thread(
            z4j_cli, admin_brain, "task", "retry", str(stack.project), str(task["id"])
        )
        assert ran.returncode == 0, ran.stdout + ran.stderr
        assert "retry_task: succeeded" in ran.stdout
        cur = await stack.db.execute("SELECT retried_as FROM tasks WHERE id = %s", (task["id"],))
        assert (await cur.fetchone() or {})["retried_as"] is not None
        await check_bulk_retry_survives_a_brain_restart(stack)
        ran = await asyncio.to_thread(
            z4j_cli, admin_brain, "task", "bulk-retry", str(stack.project), "--state",
            "succeeded", "--name", "cmd.add", "--max", "2", "--yes",
        )  # fmt: skip
        assert ran.returncode == 0, ran.stdout + ran.stderr
        assert "2 tasks match (more match; the newest 2 only)" in ran.stdout
        assert "bulk retry done: {'succeeded': 2}, skipped 0" in ran.stdout

        stop_worker(stack.worker, signal.SIGKILL)
        answer = await stack.api.post(
            f"/projects/{stack.project}/tasks/{task['id']}/retry", json={"timeout_seconds": 3}
        )
        assert answer.status_code == 202, answer.text
        command_id = answer.json()["id"]

        async def final() -> Row | None:
            got = (await stack.api.get(f"/projects/{stack.project}/commands/{command_id}")).json()
            return got if got["status"] == "timed_out" else None

        got = await wait_for(final, within=60)
        assert got is not None, stack.logs()
        assert got["result"] is None


@pytest.mark.timeout(240)
async def test_two_brains_on_one_database_behave_as_one(
    admin_brain: BrainProcess, tmp_path: Path
) -> None:
    """The agent is connected to the first brain; the operator talks to the second. The timeout
    sweeper's lock is held by exactly one of them."""
    second = BrainProcess(
        admin_brain.admin_url, admin_brain.config_dir, free_port(), tmp_path / "brain2.log"
    )
    second.start()
    try:
        async with command_stack(admin_brain, "ours", "redis", tmp_path, second.url) as stack:
            first = stack.app.send_task("cmd.add", (20, 22)).id
            original = await stack.task(first, "succeeded")
            done = await stack.command(f"tasks/{original['id']}/retry", {})
            assert done["status"] == "succeeded", (done["error"], done["result"])
            await stack.task(done["result"]["new_task_id"], "succeeded")
            cur = await stack.db.execute(
                "SELECT count(*) AS n FROM pg_locks WHERE locktype = 'advisory' AND granted "
                "AND classid::int = %s AND objid::int = %s",
                _sweeper_key(),
            )
            assert (await cur.fetchone() or {})["n"] == 1
    finally:
        second.stop()


def _sweeper_key() -> tuple[int, int]:
    from z4j.controllers.commands import SWEEP_KEY

    return SWEEP_KEY
