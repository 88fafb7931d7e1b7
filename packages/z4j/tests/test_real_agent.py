"""End to end with the real z4j-celery agent (z4j-celery 1.13 from PyPI) on Redis.

The worker loads ``real_agent_app/z4j_real_worker.py``, which only imports ``z4j_celery``; the
agent is configured by the environment lines the brain's agents page gives, plus
``Z4J_DEV_MODE=1`` for the plain-http brain of the tests. Workers run prefork without ``-E``:
the agent enables Celery's events itself.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest
from celery import Celery
from platformkit.testing.services import service_missing, tcp_reachable
from psycopg.rows import dict_row
from z4j.testing import BrainProcess, wait_for

from .workers import forget_redis_queue, stop_worker

APP_DIR = Path(__file__).parent / "real_agent_app"
BROKER = "redis://127.0.0.1:6379/13"
BACKEND = "redis://127.0.0.1:6379/12"

Row = dict[str, Any]


@dataclass
class RealStack:
    brain: BrainProcess
    creds: dict[str, Any]
    app: Celery
    queue: str
    node: str
    worker: subprocess.Popen[bytes]
    worker_log: Path
    db: psycopg.AsyncConnection[Row]

    @property
    def project_id(self) -> uuid.UUID:
        return self.creds["project_id"]

    def logs(self) -> str:
        worker = self.worker_log.read_text(errors="replace")[-5000:]
        brain = self.brain.log_path.read_text(errors="replace")[-3000:]
        return f"\n--- worker log ---\n{worker}\n--- brain log ---\n{brain}"

    async def tasks(self) -> dict[str, Row]:
        cur = await self.db.execute("SELECT * FROM tasks WHERE project_id = %s", (self.project_id,))
        return {row["engine_task_id"]: row for row in await cur.fetchall()}

    async def kinds(self, task_id: str) -> Counter[str]:
        cur = await self.db.execute(
            "SELECT e.event_type FROM events e JOIN tasks t ON t.id = e.task_id "
            "WHERE e.project_id = %s AND t.engine_task_id = %s",
            (self.project_id, task_id),
        )
        return Counter(row["event_type"] for row in await cur.fetchall())

    async def state_of(self, task_id: str, state: str, within: float = 45.0) -> Row:
        async def reached() -> Row | None:
            row = (await self.tasks()).get(task_id)
            return row if row is not None and row["state"] == state else None

        row = await wait_for(reached, within=within, interval=0.2)
        if row is None:
            got = (await self.tasks()).get(task_id)
            pytest.fail(f"{task_id} never became {state}: {got}{self.logs()}")
        return row


def start_real_worker(queue: str, env: dict[str, str], cwd: Path) -> subprocess.Popen[bytes]:
    # The agent starts only under a ``celery ... worker`` command line (it reads sys.argv).
    command = [
        str(Path(sys.executable).parent / "celery"),
        "-A",
        "z4j_real_worker",
        "worker",
        "--pool=prefork",
        "-c",
        "2",
        "-n",
        f"{queue}@%h",
        "-Q",
        queue,
        "-l",
        "info",
        # Without -E a prefork worker sends no task events: the agent's own attempt to switch
        # them on (a broadcast at worker_ready) races the worker's control consumer on Redis.
        "-E",
    ]
    with (cwd / "worker.log").open("wb") as out:
        return subprocess.Popen(
            command,
            env=env,
            cwd=cwd,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


@pytest.fixture
async def real_stack(
    request: pytest.FixtureRequest, brain_server: BrainProcess, tmp_path: Path
) -> AsyncIterator[RealStack]:
    """``request.param`` is the agent's transport: ``ws`` or ``longpoll``."""
    if not tcp_reachable("127.0.0.1", 6379):
        service_missing("redis", "nothing listens on 127.0.0.1:6379")
    creds = await brain_server.new_agent("real-workers")
    queue = f"z4j-real-{uuid.uuid4().hex[:10]}"
    home = tmp_path / "z4j-home"
    home.mkdir()
    env = {key: value for key, value in os.environ.items() if not key.startswith("Z4J_")} | {
        # The agents page's lines.
        "Z4J_BRAIN_URL": brain_server.url,
        "Z4J_TOKEN": creds["token"],
        "Z4J_HMAC_SECRET": creds["hmac_secret"],
        "Z4J_PROJECT_ID": str(creds["project_id"]),
        # The tests' brain is plain http on loopback.
        "Z4J_DEV_MODE": "1",
        "Z4J_TRANSPORT": request.param,
        "Z4J_HOME": str(home),
        "PYTHONPATH": str(APP_DIR),
        "Z4J_E2E_BROKER": BROKER,
        "Z4J_E2E_BACKEND": BACKEND,
        "Z4J_E2E_QUEUE": queue,
    }
    worker = start_real_worker(queue, env, tmp_path)
    app = Celery("z4j_real_producer", broker=BROKER, backend=BACKEND)
    app.conf.update(task_default_queue=queue, result_extended=True)
    try:
        async with await psycopg.AsyncConnection.connect(
            brain_server.admin_url, autocommit=True, row_factory=dict_row
        ) as db:
            node = f"{queue}@{os.uname().nodename}"
            built = RealStack(
                brain_server, creds, app, queue, node, worker, tmp_path / "worker.log", db
            )

            async def online() -> bool:
                cur = await db.execute(
                    "SELECT state FROM agents WHERE id = %s", (creds["agent_id"],)
                )
                row = await cur.fetchone()
                return row is not None and row["state"] == "online"

            if not await wait_for(online, within=45):
                pytest.fail(f"the real agent never connected{built.logs()}")
            yield built
    finally:
        app.close()
        stop_worker(worker)
        forget_redis_queue(BROKER, queue)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("real_stack", ["ws"], indirect=True)
async def test_real_agent_reports_messages_retries_one_revoke_and_enqueue_time(
    real_stack: RealStack,
) -> None:
    app = real_stack.app
    ok = app.send_task("real.add", (2, 3)).id
    bad = app.send_task("real.boom", ("o-7",)).id
    flaky = app.send_task("real.flaky", (2,)).id
    running = app.send_task("real.sleep", (60,)).id

    done = await real_stack.state_of(ok, "succeeded")
    assert done["enqueued_at"] is not None
    failed = await real_stack.state_of(bad, "failed")
    assert failed["error"]["exc_type"] == "ValueError"
    assert failed["error"]["exc_msg"] == "gateway refused order o-7"
    retried = await real_stack.state_of(flaky, "succeeded")
    assert retried["retries"] == 2

    await real_stack.state_of(running, "started")
    app.control.revoke(running, terminate=True)
    await real_stack.state_of(running, "cancelled")

    async def one_cancel() -> bool:
        return (await real_stack.kinds(running))["cancelled"] >= 1

    assert await wait_for(one_cancel, within=30)
    assert (await real_stack.kinds(running))["cancelled"] == 1
