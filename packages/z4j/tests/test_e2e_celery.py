"""End to end: real Celery workers with the agent, a real brain, and PostgreSQL behind it.

Each test starts ``z4j serve`` (the ``brain_server`` fixture), creates an agent, and starts a
worker (``celery -A z4j_e2e_worker worker``) whose agent is installed with the two documented
lines and configured only by environment variables. The test process publishes the tasks with
the agent installed too, so ``task.sent`` comes from a producer as it would in production.
Outcomes are checked in the database and through the REST API. See docs/z4j/testing.md.
"""

from __future__ import annotations

import asyncio
import functools
import importlib.util
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx
import psycopg
import pytest
from platformkit.testing.services import service_missing, tcp_reachable
from psycopg.rows import dict_row
from z4j.testing import BrainProcess, wait_for
from z4j_agent.buffer import EventBuffer
from z4j_agent.celery import install, uninstall

from .workers import forget_redis_queue

pytestmark = pytest.mark.long_module  # minutes: run first (platformkit.testing.plugin)

APP_DIR = Path(__file__).parent / "e2e_app"
BROKERS = {
    "redis": ("redis://127.0.0.1:6379/14", 6379),
    "rabbitmq": ("amqp://guest:guest@127.0.0.1:5672//", 5672),
}
ADMIN_EMAIL, ADMIN_PASSWORD = "e2e-admin@example.com", "a long e2e admin password"

Row = dict[str, Any]


@functools.cache
def app_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("z4j_e2e_app", APP_DIR / "z4j_e2e_app.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@dataclass
class Stack:
    """One brain, one agent, one worker node and the producer app of a test."""

    brain: BrainProcess
    project_id: uuid.UUID
    app: Any
    worker: subprocess.Popen[bytes]
    worker_log: Path
    node: str
    buffers: Path
    db: psycopg.AsyncConnection[Row]

    def logs(self) -> str:
        worker = self.worker_log.read_text(errors="replace")[-4000:]
        brain = self.brain.log_path.read_text(errors="replace")[-3000:]
        return f"\n--- worker log ---\n{worker}\n--- brain log ---\n{brain}"

    def buffered(self) -> tuple[int, int]:
        """(events waiting for an ack, events dropped) over the worker's and producer's files."""
        waiting = dropped = 0
        for path in self.buffers.glob("*.sqlite3"):
            buffer = EventBuffer(path)
            try:
                size, lost = buffer.stats()
            finally:
                buffer.close()
            waiting, dropped = waiting + size, dropped + lost
        return waiting, dropped

    async def tasks(self) -> dict[str, Row]:
        """The project's tasks by Celery task id."""
        cur = await self.db.execute("SELECT * FROM tasks WHERE project_id = %s", (self.project_id,))
        return {row["engine_task_id"]: row for row in await cur.fetchall()}

    async def events(self) -> dict[str, list[Row]]:
        """The project's timeline rows by Celery task id, in agent time order."""
        cur = await self.db.execute(
            "SELECT t.engine_task_id, e.* FROM events e JOIN tasks t ON t.id = e.task_id "
            "WHERE e.project_id = %s ORDER BY e.ts, e.id",
            (self.project_id,),
        )
        out: dict[str, list[Row]] = {}
        for row in await cur.fetchall():
            out.setdefault(row["engine_task_id"], []).append(row)
        return out

    async def settle(
        self, expected: dict[str, tuple[str, Counter[str]]], within: float = 45.0
    ) -> tuple[dict[str, Row], dict[str, list[Row]]]:
        """Wait until every task has its final state and exactly its expected timeline."""

        async def done() -> bool:
            tasks, events = await self.tasks(), await self.events()
            return all(
                task_id in tasks
                and tasks[task_id]["state"] == state
                and Counter(e["event_type"] for e in events.get(task_id, [])) == kinds
                for task_id, (state, kinds) in expected.items()
            )

        if not await wait_for(done, within=within, interval=0.2):
            tasks, events = await self.tasks(), await self.events()
            seen = {
                t: (
                    tasks[t]["state"] if t in tasks else None,
                    [e["event_type"] for e in events.get(t, [])],
                )
                for t in expected
            }
            pytest.fail(f"tasks did not settle: {seen}{self.logs()}")
        return await self.tasks(), await self.events()


def start_worker(pool: str, queue: str, env: dict[str, str], cwd: Path) -> subprocess.Popen[bytes]:
    command = [
        sys.executable,
        "-m",
        "celery",
        "-A",
        "z4j_e2e_worker",
        "worker",
        f"--pool={pool}",
        "-c",
        "2",
        "-n",
        f"{queue}@%h",
        "-Q",
        queue,
        "-l",
        "info",
        "--without-gossip",
        "--without-mingle",
        "--without-heartbeat",
    ]
    with (cwd / "worker.log").open("wb") as out:
        return subprocess.Popen(command, env=env, cwd=cwd, stdout=out, stderr=subprocess.STDOUT)


def stop_worker(worker: subprocess.Popen[bytes]) -> None:
    if worker.poll() is None:
        worker.send_signal(signal.SIGTERM)
        try:
            worker.wait(20)
        except subprocess.TimeoutExpired:
            worker.kill()
            worker.wait(10)


@pytest.fixture
async def stack(
    request: pytest.FixtureRequest,
    brain_server: BrainProcess,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> AsyncIterator[Stack]:
    """``request.param`` is (broker, pool): a worker on that broker, shipping to the brain."""
    broker_name, pool = request.param
    broker, port = BROKERS[broker_name]
    if not tcp_reachable("127.0.0.1", port):
        service_missing(broker_name, f"nothing listens on 127.0.0.1:{port}")
    creds = await brain_server.new_agent("e2e-workers")
    queue = f"z4j-e2e-{uuid.uuid4().hex[:10]}"
    buffers = tmp_path / "buffers"
    buffers.mkdir()
    agent_env = {
        "Z4J_BRAIN_URL": brain_server.url,
        "Z4J_TOKEN": creds["token"],
        "Z4J_HMAC_SECRET": creds["hmac_secret"],
        "Z4J_BUFFER_PATH": str(buffers),
        "Z4J_FLUSH_INTERVAL": "0.2",
    }
    worker_env = os.environ | agent_env
    worker_env |= {"PYTHONPATH": str(APP_DIR), "Z4J_E2E_BROKER": broker, "Z4J_E2E_QUEUE": queue}
    node = f"{queue}@{socket.gethostname()}"
    worker = start_worker(pool, queue, worker_env, tmp_path)
    app = None
    try:
        # The producer side: the same app in this process, the agent configured the same way.
        for key, value in agent_env.items():
            monkeypatch.setenv(key, value)
        app = app_module().make_app(broker, queue)
        install(app)
        async with await psycopg.AsyncConnection.connect(
            brain_server.admin_url, autocommit=True, row_factory=dict_row
        ) as db:
            built = Stack(
                brain_server,
                creds["project_id"],
                app,
                worker,
                tmp_path / "worker.log",
                node,
                buffers,
                db,
            )

            async def worker_connected() -> bool:
                # The worker's agent said hello: the node is up and its transport reached us.
                cur = await db.execute(
                    "SELECT metadata ->> 'worker_id' AS worker_id FROM agents WHERE id = %s",
                    (creds["agent_id"],),
                )
                row = await cur.fetchone()
                return row is not None and row["worker_id"] == node

            if not await wait_for(worker_connected, within=30):
                pytest.fail(f"the worker's agent never connected{built.logs()}")
            yield built
    finally:
        uninstall(timeout=2.0)
        if app is not None:
            app.close()
        stop_worker(worker)
        if broker_name == "redis":
            forget_redis_queue(broker, queue)


async def create_admin(server: BrainProcess) -> None:
    """The first admin, through the action ``z4j serve`` runs for Z4J_ADMIN_EMAIL."""
    assert await server.create_admin(ADMIN_EMAIL, ADMIN_PASSWORD)


@asynccontextmanager
async def signed_in(server: BrainProcess) -> AsyncIterator[httpx.AsyncClient]:
    """An API client with the admin's session cookie."""
    async with httpx.AsyncClient(base_url=f"{server.url}/api/v1", timeout=10) as client:
        response = await client.post(
            "/auth/login", json={"email": ADMIN_EMAIL, "password": ADMIN_PASSWORD}
        )
        assert response.status_code == 200, response.text
        yield client


def timeline(*kinds: str) -> Counter[str]:
    return Counter(kinds)


MATRIX = [("redis", "solo"), ("redis", "prefork"), ("rabbitmq", "solo"), ("rabbitmq", "prefork")]


@pytest.mark.timeout(90)
@pytest.mark.parametrize("stack", MATRIX, indirect=True, ids="-".join)
async def test_outcomes_arrive_with_their_details_and_redacted(stack: Stack) -> None:
    app = stack.app
    password = "pw-" + secrets.token_hex(8)
    stripe_key = "sk_live_" + secrets.token_hex(12)
    api_key = secrets.token_hex(16)
    ok = app.send_task("e2e.add", (2, 3), {"pause": 0.05}).id
    bad = app.send_task("e2e.charge", ("order-77",)).id
    verbose = app.send_task("e2e.fail_verbosely", (20_000,)).id
    flaky = app.send_task("e2e.flaky", ("m1", 2)).id
    exhausted = app.send_task("e2e.flaky", ("m2", 9)).id
    secret = app.send_task(
        "e2e.login",
        ("alice", f"charged with {stripe_key} at the gateway"),
        {"password": password, "comment": f"sent api_key={api_key} to billing"},
    ).id

    tasks, events = await stack.settle(
        {
            ok: ("succeeded", timeline("task_sent", "started", "succeeded")),
            bad: ("failed", timeline("task_sent", "started", "failed")),
            verbose: ("failed", timeline("task_sent", "started", "failed")),
            # Celery retries republish the same task id from the worker: one more sent and
            # started per retry.
            flaky: (
                "succeeded",
                timeline(*["task_sent", "started"] * 3, "retry", "retry", "succeeded"),
            ),
            exhausted: (
                "failed",
                timeline(*["task_sent", "started"] * 4, *["retry"] * 3, "failed"),
            ),
            secret: ("succeeded", timeline("task_sent", "started", "succeeded")),
        }
    )

    done = tasks[ok]
    assert done["name"] == "e2e.add"
    assert done["queue"] == app.conf.task_default_queue
    assert done["worker"] == stack.node
    assert done["runtime_ms"] >= 40
    assert done["started_at"] <= done["finished_at"]
    assert done["args_redacted"] == [2, 3]
    assert done["error"] is None

    failed = tasks[bad]
    assert failed["error"]["exc_type"] == "z4j_e2e_app.GatewayRefused"
    assert failed["error"]["exc_msg"] == "gateway refused order order-77"
    traceback = failed["error"]["traceback_redacted"]
    assert traceback.startswith("Traceback (most recent call last)")
    assert "refuse_at_gateway" in traceback
    assert failed["runtime_ms"] is not None
    # Tracebacks have a bound of their own (64 KiB), above that of other strings (16 KiB).
    long_traceback = tasks[verbose]["error"]["traceback_redacted"]
    assert len(long_traceback) > 20_000
    assert long_traceback.rstrip().endswith("end of the message")

    assert tasks[flaky]["retries"] == 2
    retried = [e for e in events[flaky] if e["event_type"] == "retry"]
    assert retried[0]["payload"]["exception"]["type"] == "ConnectionError"
    assert tasks[exhausted]["retries"] == 3
    assert tasks[exhausted]["error"]["exc_type"] == "ConnectionError"
    assert tasks[exhausted]["error"]["exc_msg"] == "transient m2"

    masked = tasks[secret]
    assert masked["args_redacted"] == ["alice", "charged with [redacted] at the gateway"]
    assert masked["kwargs_redacted"] == {
        "password": "[redacted]",
        "comment": "sent api_key=[redacted] to billing",
    }
    cur = await stack.db.execute(
        "SELECT string_agg(payload::text, ' ') AS text FROM events WHERE project_id = %s",
        (stack.project_id,),
    )
    stored = (await cur.fetchone() or {}).get("text") or ""
    stored += json.dumps([masked["args_redacted"], masked["kwargs_redacted"]])
    for value in (password, stripe_key, api_key):
        assert value not in stored

    # The same through the REST API.
    await create_admin(stack.brain)
    async with signed_in(stack.brain) as api:
        page = (await api.get(f"/projects/{stack.project_id}/tasks")).json()
        states = {item["engine_task_id"]: item["state"] for item in page["items"]}
        assert states == {
            ok: "succeeded",
            bad: "failed",
            verbose: "failed",
            flaky: "succeeded",
            exhausted: "failed",
            secret: "succeeded",
        }
        ids = {item["engine_task_id"]: item["id"] for item in page["items"]}

        response = await api.get(f"/projects/{stack.project_id}/tasks/{ids[secret]}")
        assert response.status_code == 200
        for value in (password, stripe_key, api_key):
            assert value not in response.text
        detail = response.json()
        assert detail["args"] == ["alice", "charged with [redacted] at the gateway"]
        assert detail["kwargs"]["password"] == "[redacted]"
        assert detail["kwargs"]["comment"] == "sent api_key=[redacted] to billing"

        detail = (await api.get(f"/projects/{stack.project_id}/tasks/{ids[bad]}")).json()
        assert detail["state"] == "failed"
        assert detail["error"]["exc_type"] == "z4j_e2e_app.GatewayRefused"
        assert "refuse_at_gateway" in detail["error"]["traceback_redacted"]
        assert [e["event_type"] for e in detail["events"]] == ["task_sent", "started", "failed"]

        detail = (await api.get(f"/projects/{stack.project_id}/tasks/{ids[flaky]}")).json()
        assert detail["retries"] == 2
        # Celery republishes a task (task_sent) before it reports the retry.
        assert [e["event_type"] for e in detail["events"]] == [
            "task_sent",
            "started",
            *["task_sent", "retry", "started"] * 2,
            "succeeded",
        ]


@pytest.mark.timeout(90)
@pytest.mark.parametrize("stack", [("rabbitmq", "prefork")], indirect=True, ids="-".join)
async def test_revoked_tasks_are_cancelled(stack: Stack) -> None:
    app = stack.app
    # Revoked before it arrives: the worker discards it without running it.
    early = str(uuid.uuid4())
    replies = app.control.revoke(early, destination=[stack.node], reply=True, timeout=10)
    assert replies, "the worker did not confirm the revoke"
    app.send_task("e2e.add", (1, 1), task_id=early)

    # Revoked while it runs: the pool child running it is terminated.
    running = app.send_task("e2e.sleep", (60,)).id

    async def started() -> bool:
        row = (await stack.tasks()).get(running)
        return row is not None and row["state"] == "started"

    assert await wait_for(started, within=30), f"the task never started{stack.logs()}"
    replies = app.control.revoke(
        running, terminate=True, destination=[stack.node], reply=True, timeout=10
    )
    assert replies, "the worker did not confirm the terminate"

    tasks, events = await stack.settle(
        {
            early: ("cancelled", timeline("task_sent", "cancelled")),
            running: ("cancelled", timeline("task_sent", "started", "cancelled")),
        }
    )
    assert tasks[early]["started_at"] is None
    assert tasks[early]["finished_at"] is not None
    # By type, not by position: task.sent is stamped after the publish returns, so under load
    # the worker's revoke of the early task can carry the earlier agent time.
    cancelled = {
        task: next(e["payload"] for e in events[task] if e["event_type"] == "cancelled")
        for task in (early, running)
    }
    assert cancelled[early]["reason"] == "revoked"
    gone = cancelled[running]
    assert (gone["reason"], gone["terminated"]) == ("terminated", True)
    assert tasks[running]["finished_at"] >= tasks[running]["started_at"]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("stack", [("redis", "prefork")], indirect=True, ids="-".join)
async def test_a_late_retry_record_does_not_hide_the_outcome(stack: Stack) -> None:
    """The first attempt's ``on_retry`` takes 0.5 s; meanwhile the other pool child runs the
    second attempt to success. The retry is recorded last, yet the task succeeded."""
    task = stack.app.send_task("e2e.retry_slow_hook", ("m3",)).id
    kinds = timeline("task_sent", "started", "task_sent", "retry", "started", "succeeded")

    async def arrived() -> bool:
        events = (await stack.events()).get(task, [])
        return Counter(e["event_type"] for e in events) == kinds

    assert await wait_for(arrived, within=20), f"events missing{stack.logs()}"
    row = (await stack.tasks())[task]
    assert (row["state"], row["retries"]) == ("succeeded", 1)


@pytest.mark.timeout(150)
@pytest.mark.parametrize("stack", [("redis", "prefork")], indirect=True, ids="-".join)
async def test_brain_killed_mid_stream_loses_and_duplicates_nothing(stack: Stack) -> None:
    """SIGKILL the brain while tasks flow, restart it on the same database and port: every
    task arrives with its final state, and every event is stored exactly once."""
    n = 200
    published: list[str] = []
    failures: list[BaseException] = []

    def publish() -> None:
        try:
            for i in range(n):
                published.append(stack.app.send_task("e2e.add", (i, i), {"pause": 0.02}).id)
                time.sleep(0.025)  # a steady stream over about five seconds
        except BaseException as exc:  # reported by the test, not lost in the thread
            failures.append(exc)

    async def twenty_succeeded() -> bool:
        cur = await stack.db.execute(
            "SELECT count(*) AS n FROM tasks WHERE project_id = %s AND state = 'succeeded'",
            (stack.project_id,),
        )
        row = await cur.fetchone()
        return row is not None and row["n"] >= 20

    publisher = threading.Thread(target=publish, name="e2e-publisher")
    publisher.start()
    try:
        assert await wait_for(twenty_succeeded, within=30), f"no live ingest{stack.logs()}"
        stack.brain.stop(signal.SIGKILL)
        killed_at = datetime.now(UTC)
        stored_at_kill = len(await stack.tasks())
        await asyncio.sleep(3)  # the outage: workers and producer keep buffering
        # The restart also creates the admin, as an operator would with these two variables.
        stack.brain.env = {"Z4J_ADMIN_EMAIL": ADMIN_EMAIL, "Z4J_ADMIN_PASSWORD": ADMIN_PASSWORD}
        stack.brain.start()
        restarted_at = datetime.now(UTC)
    finally:
        publisher.join(30)
    assert not failures, failures
    assert len(published) == n
    assert stored_at_kill < n, "the stream ended before the brain was killed"

    expected = {t: ("succeeded", timeline("task_sent", "started", "succeeded")) for t in published}
    await stack.settle(expected, within=90)

    # Once every buffered event is acknowledged nothing can arrive again: count for good.
    async def drained() -> bool:
        return stack.buffered()[0] == 0

    assert await wait_for(drained, within=30), f"events left unacknowledged{stack.logs()}"
    assert stack.buffered()[1] == 0, "the agents dropped events"
    tasks, events = await stack.tasks(), await stack.events()
    assert len(tasks) == n
    assert all(row["state"] == "succeeded" for row in tasks.values())
    assert all(row["runtime_ms"] is not None for row in tasks.values())
    every = [e for rows in events.values() for e in rows]
    assert len(every) == 3 * n
    assert all(
        Counter(e["event_type"] for e in rows) == expected[task_id][1]
        for task_id, rows in events.items()
    )
    assert len({e["id"] for e in every}) == len(every)
    assert len({(e["task_id"], e["event_type"], e["ts"]) for e in every}) == len(every)
    # Some events happened during the outage and reached the brain only after the restart.
    assert any(killed_at < e["ts"] < restarted_at <= e["created_at"] for e in every)

    async with signed_in(stack.brain) as api:
        response = await api.get(
            f"/projects/{stack.project_id}/tasks", params={"state": "succeeded", "limit": 200}
        )
        page = response.json()
        assert response.status_code == 200, page
        assert {item["engine_task_id"] for item in page["items"]} == set(published)
        assert page["next_cursor"] is None
