"""The command tests' stack: a real brain (``z4j serve``) shared by a test module, and per test
a real Celery worker with our agent or the z4j-celery agent (1.13 from PyPI), on a queue and a
project of its own, with an operator signed in to the brain's API.

Workers share the machine's Redis and RabbitMQ with other tests: every stack uses queues of its
own and addresses remote-control commands to its own node.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
import redis
from amqp.exceptions import AMQPError
from celery import Celery
from kombu.exceptions import KombuError
from platformkit.testing.databases import DatabaseFactory
from platformkit.testing.services import free_port, service_missing, tcp_reachable
from psycopg.rows import dict_row
from z4j.testing import BrainProcess, wait_for, z4j_template

from .workers import forget_redis_queue, stop_worker

APP_DIR = Path(__file__).parent / "commands_app"
BACKEND = "redis://127.0.0.1:6379/11"
BROKERS = {
    "redis": ("redis://127.0.0.1:6379/10", 6379),
    "rabbitmq": ("amqp://guest:guest@127.0.0.1:5672//", 5672),
}
ADMIN_EMAIL, ADMIN_PASSWORD = "cmd-admin@example.com", "a long command admin password"
# agent kind -> (worker module, transport)
AGENTS = {
    "ours": ("z4j_cmd_ours", "ws"),
    "ours-http": ("z4j_cmd_ours", "http"),
    "z4j-celery": ("z4j_cmd_real", "ws"),
    "z4j-celery-longpoll": ("z4j_cmd_real", "longpoll"),
}
Row = dict[str, Any]


@dataclass
class CommandStack:
    brain: BrainProcess
    agent: str
    broker_name: str
    broker: str
    creds: dict[str, Any]
    queue: str
    node: str
    app: Celery
    worker: subprocess.Popen[bytes]
    worker_log: Path
    db: psycopg.AsyncConnection[Row]
    api: httpx.AsyncClient

    @property
    def project(self) -> uuid.UUID:
        project: uuid.UUID = self.creds["project_id"]
        return project

    def logs(self) -> str:
        worker = self.worker_log.read_text(errors="replace")[-4000:]
        brain = self.brain.log_path.read_text(errors="replace")[-3000:]
        return f"\n--- worker log ---\n{worker}\n--- brain log ---\n{brain}"

    async def task(self, engine_id: str, state: str | None = None, within: float = 60) -> Row:
        async def found() -> Row | None:
            cur = await self.db.execute(
                "SELECT * FROM tasks WHERE project_id = %s AND engine_task_id = %s",
                (self.project, engine_id),
            )
            row = await cur.fetchone()
            return row if row is not None and (state is None or row["state"] == state) else None

        row = await wait_for(found, within=within, interval=0.2)
        if row is None:
            pytest.fail(f"task {engine_id} never reached {state}{self.logs()}")
        return row

    async def command(
        self, path: str, body: dict[str, Any], api: httpx.AsyncClient | None = None
    ) -> Row:
        """Issue through the API (of the stack's brain, or ``api``) and wait for the command's
        final status."""
        answer = await (api or self.api).post(f"/projects/{self.project}/{path}", json=body)
        assert answer.status_code == 202, answer.text
        command_id = answer.json()["id"]

        async def final() -> Row | None:
            got = (await self.api.get(f"/projects/{self.project}/commands/{command_id}")).json()
            return got if got["status"] in ("succeeded", "failed", "timed_out") else None

        done = await wait_for(final, within=90, interval=0.2)
        if done is None:
            pytest.fail(f"command {path} never finished{self.logs()}")
        assert done["sent_at"] is not None
        assert done["acknowledged_at"] is not None or done["status"] == "timed_out"
        return dict(done)

    async def audit(self, action: str) -> list[Row]:
        cur = await self.db.execute(
            "SELECT * FROM audit_log WHERE project_id = %s AND action = %s ORDER BY id",
            (self.project, action),
        )
        return await cur.fetchall()

    def ask(self, method: str, *args: Any) -> dict[str, Any]:
        """A remote-control read (``ping``, ``stats``, ``registered``) of the stack's node. The
        broker may drop a connection (RabbitMQ resets one on a busy machine): the read is tried
        again, and the pool connects that connection anew on its next use. The pool is left
        alone: emptying it (``force_close_all``) leaves nothing to acquire, so the next read
        waits for good, and its limit also sizes kombu's producer pool, which every app on the
        same broker URL shares."""
        for _ in range(3):
            try:
                return self._ask(method, *args)
            except (OSError, KombuError, AMQPError):
                time.sleep(1)
        return self._ask(method, *args)

    def _ask(self, method: str, *args: Any) -> dict[str, Any]:
        inspect = self.app.control.inspect([self.node], timeout=5, limit=1)
        answer: dict[str, Any] = getattr(inspect, method)(*args) or {}
        return answer

    def answers_ping(self) -> bool:
        try:
            return bool(self.ask("ping"))
        except (OSError, KombuError, AMQPError):
            return False

    def queue_length(self, queue: str) -> int:
        if self.broker_name == "redis":
            client = redis.Redis.from_url(self.broker)
            try:
                return int(client.llen(queue))
            finally:
                client.close()
        with self.app.connection_for_write() as connection:
            return int(connection.default_channel.queue_declare(queue, passive=True).message_count)


def start_worker(
    module: str, queue: str, env: dict[str, str], cwd: Path
) -> subprocess.Popen[bytes]:
    # The z4j-celery agent starts only under a ``celery ... worker`` command line.
    command = [str(Path(sys.executable).parent / "celery"), "-A", module, "worker",
               "--pool=prefork", "-c", "2", "-n", f"{queue}@%h", "-Q", queue, "-l", "info",
               "-E", "--without-gossip", "--without-mingle"]  # fmt: skip
    with (cwd / "worker.log").open("wb") as out:
        return subprocess.Popen(
            command, env=env, cwd=cwd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )


async def create_admin(server: BrainProcess) -> None:
    await server.create_admin(ADMIN_EMAIL, ADMIN_PASSWORD)


@asynccontextmanager
async def signed_in(url: str) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=f"{url}/api/v1", timeout=30) as client:
        answer = await client.post(
            "/auth/login", json={"email": ADMIN_EMAIL, "password": ADMIN_PASSWORD}
        )
        assert answer.status_code == 200, answer.text
        yield client


@asynccontextmanager
async def command_stack(
    brain: BrainProcess,
    agent: str,
    broker_name: str,
    tmp_path: Path,
    api_url: str | None = None,
    agent_url: str | None = None,
) -> AsyncIterator[CommandStack]:
    broker, port = BROKERS[broker_name]
    for name, p in ((broker_name, port), ("redis", 6379)):
        if not tcp_reachable("127.0.0.1", p):
            service_missing(name, f"nothing listens on 127.0.0.1:{p}")
    module, transport = AGENTS[agent]
    creds = await brain.new_agent(f"cmd-{agent}")
    queue = f"z4j-cmd-{uuid.uuid4().hex[:10]}"
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("Z4J_")} | {
        "Z4J_BRAIN_URL": agent_url or brain.url,
        "Z4J_TOKEN": creds["token"],
        "Z4J_HMAC_SECRET": creds["hmac_secret"],
        "Z4J_PROJECT_ID": str(creds["project_id"]),
        # The long-poll transport has no handshake to learn it from.
        "Z4J_AGENT_ID": str(creds["agent_id"]),
        "Z4J_DEV_MODE": "1",
        "Z4J_TRANSPORT": transport,
        "Z4J_HOME": str(home),
        "PYTHONPATH": str(APP_DIR),
        "Z4J_CMD_BROKER": broker,
        "Z4J_CMD_BACKEND": BACKEND,
        "Z4J_CMD_QUEUE": queue,
    }
    if module == "z4j_cmd_ours":  # the z4j-celery agent refuses this variable; ours needs it
        env |= {"Z4J_BUFFER_PATH": str(home), "Z4J_FLUSH_INTERVAL": "0.2"}
    worker = start_worker(module, queue, env, tmp_path)
    app = Celery("z4j_cmd_producer", broker=broker, backend=BACKEND)
    app.conf.update(task_default_queue=queue, result_extended=True, broker_heartbeat=0)
    try:
        async with (
            await psycopg.AsyncConnection.connect(
                brain.admin_url, autocommit=True, row_factory=dict_row
            ) as db,
            signed_in(api_url or brain.url) as api,
        ):
            stack = CommandStack(brain, agent, broker_name, broker, creds, queue,
                                 f"{queue}@{os.uname().nodename}", app, worker,
                                 tmp_path / "worker.log", db, api)  # fmt: skip

            async def ready() -> bool:
                cur = await db.execute(
                    "SELECT state, capabilities FROM agents WHERE id = %s", (creds["agent_id"],)
                )
                row = await cur.fetchone()
                return row is not None and row["state"] == "online"

            if not await wait_for(ready, within=60):
                pytest.fail(f"the {agent} agent never connected{stack.logs()}")
            # The node answers remote control once its consumer runs.
            if not await wait_for(lambda: asyncio.to_thread(stack.answers_ping), within=60):
                pytest.fail(f"the worker never answered ping{stack.logs()}")
            yield stack
    finally:
        app.close()
        stop_worker(worker)
        if broker_name == "redis":
            forget_redis_queue(broker, queue)


@pytest.fixture(scope="module")
async def admin_brain(
    database_factory: DatabaseFactory,
    brain_config_dir: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> AsyncIterator[BrainProcess]:
    """One brain with an administrator for the whole module: starting a brain costs more than
    most tests here, and each test works in a project and on queues of its own."""
    template = await z4j_template(database_factory, brain_config_dir)
    url = database_factory.create(template, stem="z4j")
    log = tmp_path_factory.mktemp("commands-brain") / "brain.log"
    server = BrainProcess(url, brain_config_dir, free_port(), log)
    try:
        server.start()
        await create_admin(server)
        yield server
    finally:
        server.stop()
        database_factory.drop(url)


async def check_retry(stack: CommandStack) -> None:
    app = stack.app
    # Retry: a new task with the same arguments, linked both ways.
    first = app.send_task("cmd.add", (2, 3)).id
    original = await stack.task(first, "succeeded")
    done = await stack.command(f"tasks/{original['id']}/retry", {})
    assert done["status"] == "succeeded", (done["error"], done["result"])
    new_engine_id = done["result"]["new_task_id"]
    assert new_engine_id != first
    retried = await stack.task(new_engine_id, "succeeded")
    assert app.AsyncResult(new_engine_id).get(timeout=30) == 5
    cur = await stack.db.execute("SELECT retried_as FROM tasks WHERE id = %s", (original["id"],))
    assert (await cur.fetchone() or {})["retried_as"] == retried["id"]
    detail = (await stack.api.get(f"/projects/{stack.project}/tasks/{retried['id']}")).json()
    assert detail["retry_of"] == str(original["id"])
    (row,) = await stack.audit("task.retry")
    assert row["target_id"] == original["id"]
    assert row["details"]["command_id"] == done["id"]


async def check_cancel(stack: CommandStack) -> None:
    app = stack.app
    # Cancel with terminate: a running task stops.
    running = app.send_task("cmd.sleep", (120,)).id
    started = await stack.task(running, "started")
    done = await stack.command(f"tasks/{started['id']}/cancel", {"terminate": True})
    assert done["status"] == "succeeded", (done["error"], done["result"])
    await stack.task(running, "cancelled")
    assert (await stack.audit("task.cancel"))[0]["details"]["terminate"] is True

    # Cancel before it runs: the revoked task never starts.
    later = app.send_task("cmd.add", (1, 1), countdown=4).id
    waiting = await stack.task(later)
    done = await stack.command(f"tasks/{waiting['id']}/cancel", {})
    assert done["status"] == "succeeded", (done["error"], done["result"])
    await stack.task(later, "cancelled", within=60)
    cur = await stack.db.execute(
        "SELECT event_type FROM events WHERE task_id = %s", (waiting["id"],)
    )
    assert "started" not in {r["event_type"] for r in await cur.fetchall()}
