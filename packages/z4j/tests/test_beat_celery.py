"""End to end: schedules created through the API, fired by two real ``celery beat`` processes
running ``z4j_agent.beat:BrainScheduler``, run by a real Celery worker on Redis, and observed by
the brain through the worker's agent. The beats' app has a ``beat_schedule`` of its own, which
they report to the brain at start: its entries are kept once and run from the brain too.

Two beats run at once the whole time, so every slot is claimed by two processes: the brain must
see each run once, the runs of an interval schedule must be at least its period apart, and the
beats' logs together must show exactly as many sends as the brain counted runs. A schedule that
skips a run while its last one has not finished never has two runs at once. Disabling stops
the runs; "run now" fires an hourly schedule at once; a cron schedule fires on the minute.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import re
import subprocess
import sys
import uuid
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
from platformkit.testing.services import service_missing, tcp_reachable
from psycopg.rows import dict_row
from z4j.testing import BrainProcess, wait_for

from .test_e2e_celery import APP_DIR, create_admin, signed_in, start_worker, stop_worker
from .workers import forget_redis_queue

BROKER = "redis://127.0.0.1:6379/14"
BEAT_APP_DIR = Path(__file__).parent / "beat_app"
SENT = re.compile(r"Scheduler: Sending due task (.+?) \((.+?)\) id=(\S+)")


def start_beat(env: dict[str, str], cwd: Path, name: str) -> subprocess.Popen[bytes]:
    command = [sys.executable, "-m", "celery", "-A", "z4j_beat_app", "beat",
               "-S", "z4j_agent.beat:BrainScheduler", "-l", "info"]  # fmt: skip
    with (cwd / f"{name}.log").open("wb") as out:
        return subprocess.Popen(command, env=env, cwd=cwd, stdout=out, stderr=subprocess.STDOUT)


def sends(cwd: Path) -> list[tuple[str, str]]:
    """(schedule name, task id) of every run the beats sent, from both logs."""
    found = []
    for log in sorted(cwd.glob("beat-*.log")):
        found += [(m[1], m[3]) for m in SENT.finditer(log.read_text(errors="replace"))]
    return found


def beat_logs(cwd: Path) -> str:
    return "".join(log.read_text(errors="replace") for log in sorted(cwd.glob("beat-*.log")))


def losses(cwd: Path) -> int:
    """Claims a beat lost: the slot was the other beat's (or had moved)."""
    return sum(log.read_text().count("was claimed elsewhere") for log in cwd.glob("beat-*.log"))


@pytest.fixture
def redis_up() -> None:
    if not tcp_reachable("127.0.0.1", 6379):
        service_missing("redis", "nothing listens on 127.0.0.1:6379")


@pytest.mark.timeout(300)
async def test_two_beats_fire_brain_schedules_once_each(
    redis_up: None, brain_server: BrainProcess, tmp_path: Path
) -> None:
    await create_admin(brain_server)
    creds = await brain_server.new_agent("beat-workers")
    project = creds["project_id"]
    queue = f"z4j-beat-{uuid.uuid4().hex[:10]}"
    env = os.environ | {
        "Z4J_BRAIN_URL": brain_server.url, "Z4J_TOKEN": creds["token"],
        "Z4J_HMAC_SECRET": creds["hmac_secret"], "Z4J_BUFFER_PATH": str(tmp_path / "buffers/"),
        "Z4J_FLUSH_INTERVAL": "0.2", "Z4J_BEAT_SYNC_SECONDS": "0.5",
        "PYTHONPATH": os.pathsep.join((str(APP_DIR), str(BEAT_APP_DIR))),
        "Z4J_E2E_BROKER": BROKER, "Z4J_E2E_QUEUE": queue,
    }  # fmt: skip
    (tmp_path / "buffers").mkdir()
    base = f"/projects/{project}/schedules"
    processes: list[subprocess.Popen[bytes]] = []

    def logs() -> str:
        return (
            "".join(
                f"\n--- {p.name} ---\n{p.read_text(errors='replace')[-3000:]}"
                for p in sorted(tmp_path.glob("*.log"))
            )
            + f"\n--- brain ---\n{brain_server.log_path.read_text(errors='replace')[-2000:]}"
        )

    try:
        processes.append(start_worker("solo", queue, env, tmp_path))
        async with (
            signed_in(brain_server) as http,
            await psycopg.AsyncConnection.connect(
                brain_server.admin_url, autocommit=True, row_factory=dict_row
            ) as db,
        ):

            async def schedule(sid: str) -> dict[str, Any]:
                answer = await http.get(f"{base}/{sid}")
                assert answer.status_code == 200, answer.text
                body: dict[str, Any] = answer.json()
                return body

            async def runs(task_ids: set[str]) -> list[dict[str, Any]]:
                """The brain's tasks with these Celery ids, oldest first."""
                cur = await db.execute(
                    "SELECT engine_task_id, state::text AS state, name, args_redacted, "
                    "enqueued_at FROM tasks WHERE project_id = %s AND engine_task_id = ANY(%s) "
                    "ORDER BY enqueued_at",
                    (project, list(task_ids)),
                )
                return await cur.fetchall()

            def sent_ids(name: str) -> set[str]:
                return {task_id for sent, task_id in sends(tmp_path) if sent == name}

            every = (await http.post(base, json={
                "name": "every-2s", "task": "e2e.add", "schedule_type": "interval",
                "expression": "2s", "args": [2, 3], "queue": queue,
            })).json()  # fmt: skip
            hourly = (await http.post(base, json={
                "name": "hourly", "task": "e2e.add", "schedule_type": "interval",
                "expression": "1h", "args": [40, 2], "queue": queue,
            })).json()  # fmt: skip
            minute = (await http.post(base, json={
                "name": "each-minute", "task": "e2e.add", "schedule_type": "cron",
                "expression": "* * * * *", "timezone": "Asia/Kolkata", "args": [1, 1],
                "queue": queue,
            })).json()  # fmt: skip
            alone = (await http.post(base, json={
                "name": "one-at-a-time", "task": "e2e.add", "schedule_type": "interval",
                "expression": "1s", "args": [5, 5], "kwargs": {"pause": 2.5},
                "skip_if_running": True, "queue": queue,
            })).json()  # fmt: skip
            for n in (1, 2):
                processes.append(start_beat(env, tmp_path, f"beat-{n}"))

            async def five_runs_observed() -> bool:
                done = [r for r in await runs(sent_ids("every-2s")) if r["state"] == "succeeded"]
                return len(done) >= 5

            if not await wait_for(five_runs_observed, within=120, interval=0.5):
                pytest.fail(f"the interval schedule's runs were not observed{logs()}")

            # The app's beat_schedule, reported by both beats, is kept once and runs from the brain.
            kept = {s["name"]: s for s in (await http.get(base)).json()}
            assert "app-on-paydays" not in kept  # its own schedule class: no kind of the brain
            weekdays = kept["app-weekday-mornings"]
            assert (weekdays["schedule_type"], weekdays["expression"], weekdays["timezone"]) == (
                "cron", "*/15 9-17 * * mon-fri", "UTC")  # fmt: skip
            assert kept["app-every-3s"]["expression"] == "3"
            cur = await db.execute(
                "SELECT details ->> 'name' AS name FROM audit_log WHERE project_id = %s "
                "AND action = 'schedule.create' AND actor_user_id IS NULL ORDER BY name",
                (project,),
            )
            assert [r["name"] for r in await cur.fetchall()] == [
                "app-every-3s", "app-weekday-mornings"]  # fmt: skip

            async def app_schedule_ran() -> bool:
                done = await runs(sent_ids("app-every-3s"))
                return sum(r["state"] == "succeeded" for r in done) >= 2

            if not await wait_for(app_schedule_ran, within=60, interval=0.5):
                pytest.fail(f"the app's own schedule did not run from the brain{logs()}")
            assert "app-on-paydays: only crontab and interval" in beat_logs(tmp_path)

            # Skip while running: a 1 s schedule of a 2.5 s task never has two runs at once.
            async def three_alone() -> bool:
                done = await runs(sent_ids("one-at-a-time"))
                return sum(r["state"] == "succeeded" for r in done) >= 3

            if not await wait_for(three_alone, within=90, interval=0.5):
                pytest.fail(f"the skip-while-running schedule did not run{logs()}")
            cur = await db.execute(
                "SELECT started_at, finished_at FROM tasks WHERE project_id = %s "
                "AND engine_task_id = ANY(%s) AND state = 'succeeded' ORDER BY started_at",
                (project, list(sent_ids("one-at-a-time"))),
            )
            spans = await cur.fetchall()
            for before, after in itertools.pairwise(spans):
                assert after["started_at"] >= before["finished_at"], spans
            assert (await schedule(alone["id"]))["skipped_count"] >= 2

            # Run now: the hourly schedule, due in an hour, fires at the next sync.
            assert (await http.post(f"{base}/{hourly['id']}/run")).status_code == 202

            async def hourly_ran() -> bool:
                return bool(sent_ids("hourly")) and (
                    (await schedule(hourly["id"]))["last_task_state"] == "succeeded"
                )

            if not await wait_for(hourly_ran, within=60, interval=0.5):
                pytest.fail(f"run now did not fire the hourly schedule{logs()}")
            after_run = await schedule(hourly["id"])
            assert after_run["total_run_count"] == 1
            assert datetime.fromisoformat(after_run["next_run_at"]) - datetime.fromisoformat(
                after_run["last_run_at"]
            ) == timedelta(hours=1)

            # Disable: no run is sent after the beats' next sync, and every sent one arrived.
            off = (await http.post(f"{base}/{every['id']}/disable")).json()
            assert off["next_run_at"] is None
            await asyncio.sleep(3.0)
            frozen = await schedule(every["id"])
            fired = sent_ids("every-2s")
            await asyncio.sleep(6.0)  # three periods and more
            assert sent_ids("every-2s") == fired, logs()
            assert (await schedule(every["id"]))["total_run_count"] == frozen["total_run_count"]

            async def all_observed() -> bool:
                return len(await runs(fired)) == len(fired)

            assert await wait_for(all_observed, within=60, interval=0.5), logs()
            observed = await runs(fired)
            # Two beats claimed every slot; each run was sent once and counted once.
            assert len(fired) == frozen["total_run_count"] >= 5
            assert len(sends(tmp_path)) == len(set(sends(tmp_path)))
            # and the beats did contend: a beat lost a slot to the other at least once
            assert losses(tmp_path) >= 1, logs()
            assert all(r["name"] == "e2e.add" and r["args_redacted"] == [2, 3] for r in observed)
            gaps = [b["enqueued_at"] - a["enqueued_at"] for a, b in itertools.pairwise(observed)]
            assert min(gaps) >= timedelta(seconds=1.5), gaps

            # The cron schedule fires on the minute, on its zone's clock (Kolkata is +05:30).
            async def minute_ran() -> bool:
                return (await schedule(minute["id"]))["last_task_state"] == "succeeded"

            if not await wait_for(minute_ran, within=90, interval=0.5):
                pytest.fail(f"the cron schedule did not fire{logs()}")
            ran = await schedule(minute["id"])
            last, following = (
                datetime.fromisoformat(ran[k]) for k in ("last_run_at", "next_run_at")
            )
            assert (following.second, following.microsecond) == (0, 0)
            assert timedelta(0) < following - last <= timedelta(minutes=1)
            assert len(sent_ids("each-minute")) == ran["total_run_count"]
    finally:
        for process in processes:
            stop_worker(process)
        forget_redis_queue(BROKER, queue)
