"""Real prefork Celery workers on Redis, with our agent and with the z4j-celery agent.

Task events: our agent records starts and outcomes in the pool processes themselves, so -E
changes nothing for it. The z4j-celery agent learns of them only from Celery's task events; it
turns them on itself at worker_ready by a broadcast that a prefork worker on Redis may not hear
yet, so without -E it needs ``worker_send_task_events = True`` in the configuration.

Lost tasks: a worker killed with SIGKILL mid-task leaves its task lost within the grace period,
with either agent; with our agent, a worker cut off from the brain while it keeps running the
task gets it back to started when it reconnects.

The brain runs with a grace period of a few seconds, heartbeats every second and the notice
on a task with no start reported after ten seconds; waits have generous ceilings.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from celery import Celery
from platformkit.testing.databases import DatabaseFactory
from platformkit.testing.services import free_port, service_missing, tcp_reachable
from psycopg.rows import dict_row
from z4j.testing import BrainProcess, wait_for, z4j_template

from .workers import forget_redis_queue

pytestmark = pytest.mark.long_module  # minutes: run first (platformkit.testing.plugin)

TESTS = Path(__file__).parent
BROKER = "redis://127.0.0.1:6379/11"
RABBIT = "amqp://guest:guest@127.0.0.1:5672//"
ADMIN_EMAIL, ADMIN_PASSWORD = "prefork-admin@example.com", "a long prefork admin password"
GRACE = 6
NO_START_AFTER = timedelta(seconds=10)
QUICK = {
    "Z4J_LOST_AFTER_SECONDS": str(GRACE),
    "Z4J_LOST_SWEEP_SECONDS": "0.5",
    "Z4J_HEARTBEAT_INTERVAL_SECONDS": "1",
    "Z4J_NO_START_AFTER_SECONDS": str(NO_START_AFTER.total_seconds()),
}


@pytest.fixture(autouse=True)
def _redis() -> None:
    if not tcp_reachable("127.0.0.1", 6379):
        service_missing("redis", "nothing listens on 127.0.0.1:6379")


@pytest.fixture(scope="module")
async def brain_server(
    database_factory: DatabaseFactory,
    brain_config_dir: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> AsyncIterator[BrainProcess]:
    """One brain for the tests that need no brain of their own: each works in a project, with
    an agent and on a queue of its own, and finds its tasks by their unique Celery ids."""
    template = await z4j_template(database_factory, brain_config_dir)
    url = database_factory.create(template, stem="z4j")
    log = tmp_path_factory.mktemp("prefork-brain") / "brain.log"
    server = BrainProcess(url, brain_config_dir, free_port(), log, env=QUICK)
    try:
        server.start()
        yield server
    finally:
        server.stop()
        database_factory.drop(url)


@pytest.fixture
def queue() -> Iterator[str]:
    name = f"z4j-lost-{uuid.uuid4().hex[:10]}"
    yield name
    forget_redis_queue(BROKER, name)


def worker_env(server: BrainProcess, creds: dict[str, Any], queue: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("Z4J_")}
    return env | {
        "Z4J_BRAIN_URL": server.url,
        "Z4J_TOKEN": creds["token"],
        "Z4J_HMAC_SECRET": creds["hmac_secret"],
        "Z4J_PROJECT_ID": str(creds["project_id"]),
        "Z4J_E2E_BROKER": BROKER,
        "Z4J_E2E_BACKEND": BROKER,
        "Z4J_E2E_QUEUE": queue,
    }


async def our_agent_env(server: BrainProcess, queue: str, tmp: Path) -> dict[str, str]:
    """The environment of a worker with our agent, a new agent of ``server``."""
    creds = await server.new_agent("ours")
    return worker_env(server, creds, queue) | {
        "PYTHONPATH": str(TESTS / "e2e_app"),
        "Z4J_BUFFER_PATH": str(tmp / "buf"),
    }


def start_worker(
    module: str, queue: str, env: dict[str, str], cwd: Path, *extra: str
) -> subprocess.Popen[bytes]:
    command = [
        str(Path(sys.executable).parent / "celery"),
        "-A",
        module,
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
        *extra,
    ]
    with (cwd / "worker.log").open("ab") as out:
        return subprocess.Popen(
            command, env=env, cwd=cwd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )


def kill_group(worker: subprocess.Popen[bytes], sig: int = signal.SIGKILL) -> None:
    if worker.poll() is None:
        os.killpg(worker.pid, sig)
        worker.wait(30)


def task_row(server: BrainProcess, task: str) -> dict[str, Any] | None:
    with psycopg.connect(server.admin_url, row_factory=dict_row) as conn:
        return conn.execute("SELECT * FROM tasks WHERE engine_task_id = %s", (task,)).fetchone()


def timeline(server: BrainProcess, task: str) -> list[dict[str, Any]]:
    with psycopg.connect(server.admin_url, row_factory=dict_row) as conn:
        return conn.execute(
            "SELECT e.event_type, e.payload FROM events e JOIN tasks t ON t.id = e.task_id "
            "WHERE t.engine_task_id = %s ORDER BY e.ts, e.created_at",
            (task,),
        ).fetchall()


async def reaches(server: BrainProcess, task: str, state: str, tmp: Path, within: float) -> None:
    async def reached() -> bool:
        row = task_row(server, task)
        return row is not None and row["state"] == state

    if not await wait_for(reached, within=within, interval=0.25):
        worker_log = (tmp / "worker.log").read_text(errors="replace")[-4000:]
        pytest.fail(
            f"{task} is {(task_row(server, task) or {}).get('state')}, never {state}\n"
            f"--- worker ---\n{worker_log}\n--- brain ---\n{server.log_path.read_text()[-3000:]}"
        )


async def events_flow(server: BrainProcess, app: Celery, tmp: Path) -> None:
    """Wait until the z4j-celery agent's events monitor hears the worker: it subscribes to the
    broker's events after the worker is ready, and an event sent before that is never heard
    (a task started in that moment stays pending). A probe task is sent until one is seen
    succeeded."""
    probes: list[str] = []
    sent_at = 0.0

    async def heard() -> bool:
        nonlocal sent_at
        if any((task_row(server, t) or {}).get("state") == "succeeded" for t in probes):
            return True
        if time.monotonic() - sent_at > 10:  # the last probe may have been missed: another
            probes.append(app.send_task("real.add", (1, 1)).id)
            sent_at = time.monotonic()
        return False

    if not await wait_for(heard, within=120, interval=0.5):
        worker_log = (tmp / "worker.log").read_text(errors="replace")[-4000:]
        pytest.fail(f"no probe task was ever reported succeeded\n--- worker ---\n{worker_log}")


def producer(queue: str, broker: str = BROKER) -> Celery:
    app = Celery("z4j_lost_producer", broker=broker)
    app.conf.update(task_default_queue=queue)
    return app


async def settles(server: BrainProcess, tasks: dict[str, str], tmp: Path) -> None:
    for task, state in tasks.items():
        await reaches(server, task, state, tmp, within=90)
        kinds = Counter(r["event_type"] for r in timeline(server, task))
        assert kinds[state] == 1, kinds


@pytest.mark.timeout(240)
@pytest.mark.parametrize("flags", [(), ("-E",)], ids=["without-E", "with-E"])
async def test_our_agent_reports_prefork_states_with_or_without_events(
    brain_server: BrainProcess, queue: str, tmp_path: Path, flags: tuple[str, ...]
) -> None:
    env = await our_agent_env(brain_server, queue, tmp_path)
    worker = start_worker("z4j_e2e_worker", queue, env, tmp_path, *flags)
    app = producer(queue)
    try:
        ok = app.send_task("e2e.add", (2, 3)).id
        bad = app.send_task("e2e.charge", ("o-1",)).id
        await settles(brain_server, {ok: "succeeded", bad: "failed"}, tmp_path)
    finally:
        app.close()
        kill_group(worker, signal.SIGTERM)


def z4j_celery_env(
    server: BrainProcess, creds: dict[str, Any], queue: str, tmp: Path
) -> dict[str, str]:
    home = tmp / "z4j-home"
    home.mkdir(exist_ok=True)
    return worker_env(server, creds, queue) | {
        "PYTHONPATH": str(TESTS / "real_agent_app"),
        "Z4J_DEV_MODE": "1",
        "Z4J_TRANSPORT": "ws",
        "Z4J_HOME": str(home),
    }


@pytest.mark.timeout(240)
@pytest.mark.parametrize("how", ["-E", "configuration", "rabbitmq"])
async def test_z4j_celery_reports_prefork_states_with_task_events_on(
    brain_server: BrainProcess, queue: str, tmp_path: Path, how: str
) -> None:
    """With -E; without it but with ``worker_send_task_events``; and on RabbitMQ with neither,
    where the agent's own broadcast reaches the worker ("enabled by remote" in its log)."""
    broker = RABBIT if how == "rabbitmq" else BROKER
    if how == "rabbitmq" and not tcp_reachable("127.0.0.1", 5672):
        service_missing("rabbitmq", "nothing listens on 127.0.0.1:5672")
    creds = await brain_server.new_agent("z4j-celery")
    env = z4j_celery_env(brain_server, creds, queue, tmp_path) | {"Z4J_E2E_BROKER": broker}
    flags: tuple[str, ...] = ("-E",) if how == "-E" else ()
    if how == "configuration":
        env["Z4J_E2E_TASK_EVENTS"] = "1"
    worker = start_worker("z4j_real_worker", queue, env, tmp_path, *flags)
    app = producer(queue, broker)
    try:
        await events_flow(brain_server, app, tmp_path)
        ok = app.send_task("real.add", (2, 3)).id
        bad = app.send_task("real.boom", ("o-2",)).id
        await settles(brain_server, {ok: "succeeded", bad: "failed"}, tmp_path)
    finally:
        kill_group(worker, signal.SIGTERM)
        if how == "rabbitmq":
            with app.connection_for_write() as conn:
                conn.default_channel.queue_delete(queue)
        app.close()


@pytest.mark.timeout(300)
async def test_z4j_celery_without_task_events_on_redis_is_named_on_the_dashboard(
    brain_server: BrainProcess, queue: str, tmp_path: Path
) -> None:
    """Neither -E nor the setting, on Redis: the agent's broadcast comes too early for the
    worker, the received task never starts, and the task and agent pages say why. (Should the
    broadcast ever be heard, the task simply succeeds.)"""
    creds = await brain_server.new_agent("z4j-celery")
    env = z4j_celery_env(brain_server, creds, queue, tmp_path)
    worker = start_worker("z4j_real_worker", queue, env, tmp_path)
    app = producer(queue)
    try:
        task = app.send_task("real.add", (2, 3)).id

        async def seen() -> dict[str, Any] | None:
            return task_row(brain_server, task)

        row = await wait_for(seen, within=90)
        assert row is not None, "the worker never reported receiving the task"

        async def settled_or_noticed() -> bool:
            now = task_row(brain_server, task)
            return now is not None and (
                now["state"] == "succeeded"
                or datetime.now(UTC) - now["enqueued_at"] > NO_START_AFTER + timedelta(seconds=2)
            )

        assert await wait_for(settled_or_noticed, within=150, interval=1)
        row = task_row(brain_server, task)
        assert row is not None
        if row["state"] == "succeeded":
            return
        assert row["state"] == "pending"
        await create_admin(brain_server)
        async with httpx.AsyncClient(base_url=brain_server.url, timeout=10) as http:
            login = await http.post(
                "/api/v1/auth/login", json={"email": ADMIN_EMAIL, "password": ADMIN_PASSWORD}
            )
            assert login.status_code == 200, login.text
            page = await http.get(f"/projects/{creds['project_id']}/tasks/{row['id']}")
            assert "no start has been reported" in page.text
            assert "worker_send_task_events = True" in page.text
            agents = await http.get(f"/projects/{creds['project_id']}/agents")
            assert "no start reported" in agents.text
    finally:
        app.close()
        kill_group(worker, signal.SIGTERM)


async def create_admin(server: BrainProcess) -> None:
    assert await server.create_admin(ADMIN_EMAIL, ADMIN_PASSWORD)


async def assert_lost_when_killed(
    server: BrainProcess, task: str, worker: subprocess.Popen[bytes], tmp: Path
) -> None:
    """``task`` started, then its worker killed: the task lost, the worker's silence the
    reason."""
    await reaches(server, task, "started", tmp, within=90)
    kill_group(worker)
    await reaches(server, task, "lost", tmp, within=GRACE + 60)
    rows = timeline(server, task)
    lost = [r for r in rows if r["event_type"] == "lost"]
    assert len(lost) == 1, rows
    assert "silent" in lost[0]["payload"]["reason"]


@pytest.mark.timeout(240)
async def test_our_agent_worker_killed_mid_task_leaves_it_lost(
    brain_server: BrainProcess, queue: str, tmp_path: Path
) -> None:
    env = await our_agent_env(brain_server, queue, tmp_path)
    worker = start_worker("z4j_e2e_worker", queue, env, tmp_path)
    app = producer(queue)
    try:
        task = app.send_task("e2e.sleep", (300,)).id
        await assert_lost_when_killed(brain_server, task, worker, tmp_path)
    finally:
        app.close()
        kill_group(worker)


@pytest.mark.timeout(300)
async def test_our_agent_worker_killed_and_restarted_at_once_leaves_it_lost(
    brain_database: str, brain_config_dir: Path, queue: str, tmp_path: Path
) -> None:
    # A supervisor restarts the worker under the same node name well within the grace period:
    # the worker is never silent for long, but its list of running tasks no longer has the task.
    # The grace is long enough for a restart on a loaded machine; the task is lost as soon as
    # the new worker reports its running tasks, so it costs nothing when the machine is quick.
    grace = 60
    server = BrainProcess(
        brain_database,
        brain_config_dir,
        free_port(),
        tmp_path / "brain.log",
        env=QUICK | {"Z4J_LOST_AFTER_SECONDS": str(grace)},
    )
    server.start()
    env = await our_agent_env(server, queue, tmp_path)
    worker = start_worker("z4j_e2e_worker", queue, env, tmp_path)
    app = producer(queue)
    try:
        task = app.send_task("e2e.sleep", (300,)).id
        await reaches(server, task, "started", tmp_path, within=90)
        kill_group(worker)
        worker = start_worker("z4j_e2e_worker", queue, env, tmp_path)
        await reaches(server, task, "lost", tmp_path, within=grace + 90)
        reasons = [
            r["payload"]["reason"] for r in timeline(server, task) if r["event_type"] == "lost"
        ]
        assert len(reasons) == 1
        assert "no longer lists it" in reasons[0]
    finally:
        app.close()
        kill_group(worker)
        server.stop()


@pytest.mark.timeout(300)
async def test_our_agent_cut_off_while_running_gets_its_task_back(
    brain_database: str, brain_config_dir: Path, queue: str, tmp_path: Path
) -> None:
    # Two brains on one database: the worker talks to the first; while it is down, the second
    # keeps sweeping and marks the task lost; the first comes back, the worker reconnects to it
    # still running the task and reports it active.
    port = free_port()
    first = BrainProcess(brain_database, brain_config_dir, port, tmp_path / "first.log", env=QUICK)
    second = BrainProcess(
        brain_database, brain_config_dir, free_port(), tmp_path / "second.log", env=QUICK
    )
    first.start()
    second.start()
    env = await our_agent_env(first, queue, tmp_path)
    worker = start_worker("z4j_e2e_worker", queue, env, tmp_path)
    app = producer(queue)
    try:
        task = app.send_task("e2e.sleep", (300,)).id
        await reaches(first, task, "started", tmp_path, within=90)
        first.stop(signal.SIGKILL)
        await reaches(second, task, "lost", tmp_path, within=GRACE + 60)
        first.start()
        await reaches(second, task, "started", tmp_path, within=90)
        back = [r for r in timeline(second, task) if r["payload"].get("source") == "brain"]
        assert [r["event_type"] for r in back] == ["lost", "started"]
    finally:
        app.close()
        kill_group(worker)
        first.stop()
        second.stop()


@pytest.mark.timeout(240)
async def test_z4j_celery_worker_killed_mid_task_leaves_it_lost(
    brain_server: BrainProcess, queue: str, tmp_path: Path
) -> None:
    creds = await brain_server.new_agent("z4j-celery")
    env = z4j_celery_env(brain_server, creds, queue, tmp_path)
    # -E: without it z4j-celery reports no start on a prefork worker (see docs/z4j/agent.md).
    worker = start_worker("z4j_real_worker", queue, env, tmp_path, "-E")
    app = producer(queue)
    try:
        await events_flow(brain_server, app, tmp_path)
        task = app.send_task("real.sleep", (300,)).id
        await assert_lost_when_killed(brain_server, task, worker, tmp_path)
    finally:
        app.close()
        kill_group(worker)
