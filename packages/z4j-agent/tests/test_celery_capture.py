"""Real Celery workers (solo and prefork, on Redis and RabbitMQ) with the brain down.

Every event must land in the local SQLite buffer with the right kind and redacted data: this
shows that capture works in the worker's main process and in prefork children, and that an
outage of the brain loses nothing.
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from celery import signals  # type: ignore[import-untyped]
from platformkit.testing.services import free_port, service_missing, tcp_reachable
from z4j_agent.buffer import EventBuffer
from z4j_agent.celery import install, uninstall
from z4j_agent.config import AgentConfig
from z4j_agent.events import utc_iso
from z4j_agent.protocol import encode_secret

APP_DIR = Path(__file__).parent / "celeryapp"
BROKERS = {
    "redis": ("redis://127.0.0.1:6379/15", 6379),
    "rabbitmq": ("amqp://guest:guest@127.0.0.1:5672//", 5672),
}
PASSWORD = "hunter2-" + uuid.uuid4().hex[:8]
API_KEY = "k3y-" + uuid.uuid4().hex[:12]
SECRET = os.urandom(32)


def _make_app() -> Callable[[str, str], Any]:
    spec = importlib.util.spec_from_file_location("z4j_test_app", APP_DIR / "z4j_test_app.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.make_app  # type: ignore[no-any-return]


def read_events(path: Path) -> list[dict[str, Any]]:
    buffer = EventBuffer(path)
    try:
        return [json.loads(body) for _, body in buffer.peek(100_000)]
    finally:
        buffer.close()


def wait_for(
    path: Path,
    check: Callable[[list[dict[str, Any]]], bool],
    what: str,
    worker: subprocess.Popen[bytes],
    log: Path,
    seconds: float = 25.0,
) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if path.exists() and check(read_events(path)):
            return
        if worker.poll() is not None:
            break
        time.sleep(0.1)
    pytest.fail(f"{what} not buffered; worker log:\n{log.read_text()[-4000:]}")


@pytest.fixture(
    params=[("redis", "solo"), ("redis", "prefork"), ("rabbitmq", "solo"), ("rabbitmq", "prefork")],
    ids=lambda p: f"{p[0]}-{p[1]}",
)
def worker(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[dict[str, Any]]:
    broker_name, pool = request.param
    broker, port = BROKERS[broker_name]
    if not tcp_reachable("127.0.0.1", port):
        service_missing(broker_name, f"nothing listens on 127.0.0.1:{port}")
    queue = f"z4j-test-{uuid.uuid4().hex[:10]}"
    buffer_path = tmp_path / "buffer.sqlite3"
    config = AgentConfig(
        brain_url=f"http://127.0.0.1:{free_port()}",
        token="tok",
        hmac_secret=SECRET,
        buffer_path=buffer_path,
        flush_interval=0.2,
    )
    env = os.environ | {
        "PYTHONPATH": str(APP_DIR),
        "Z4J_TEST_BROKER": broker,
        "Z4J_TEST_QUEUE": queue,
        "Z4J_TEST_HEARTBEAT": "1",
        "Z4J_BRAIN_URL": config.brain_url,
        "Z4J_TOKEN": "tok",
        "Z4J_HMAC_SECRET": encode_secret(SECRET),
        "Z4J_BUFFER_PATH": str(buffer_path),
    }
    command = [
        sys.executable,
        "-m",
        "celery",
        "-A",
        "z4j_test_worker",
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
    log = tmp_path / "worker.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            command, env=env, cwd=tmp_path, stdout=out, stderr=subprocess.STDOUT
        )
    app = _make_app()(broker, queue)
    install(app, config)
    try:
        wait_for(
            buffer_path,
            lambda evs: any(e["kind"] == "worker.online" for e in evs),
            "worker.online",
            process,
            log,
        )
        yield {
            "app": app,
            "process": process,
            "log": log,
            "buffer": buffer_path,
            "pool": pool,
            "node": f"{queue}@{socket.gethostname()}",
        }
    finally:
        uninstall(timeout=1.0)
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(5)
        app.close()
        if broker_name == "redis":  # kombu keeps a binding key per queue name
            client = redis.Redis.from_url(broker)
            for key in client.scan_iter(match=f"*{queue}*"):
                client.delete(key)
            client.close()


def _by_task(events: list[dict[str, Any]], task_id: str) -> dict[str, list[dict[str, Any]]]:
    kinds: dict[str, list[dict[str, Any]]] = {}
    for event in events:
        if event["task_id"] == task_id:
            kinds.setdefault(event["kind"], []).append(event["data"])
    return kinds


@pytest.mark.timeout(90)
def test_events_are_captured_and_buffered_while_the_brain_is_down(worker: dict[str, Any]) -> None:
    app, path, process, log = worker["app"], worker["buffer"], worker["process"], worker["log"]
    ok = app.tasks["z4j_test.add"].delay(2, 3, password=PASSWORD).id
    # Positional: masked because the task's parameter is named api_key.
    bad = app.tasks["z4j_test.fail"].delay(API_KEY).id
    flaky = app.send_task("z4j_test.flaky", ("m",)).id
    # Received at once, due after it expires: the worker discards it as expired (an already
    # expired message would never reach a worker on RabbitMQ, which drops it by TTL).
    expired = app.send_task("z4j_test.add", (1, 1), countdown=1.0, expires=0.5).id
    revoked = str(uuid.uuid4())
    replies = app.control.revoke(
        revoked, destination=[worker["node"]], reply=True, limit=1, timeout=10
    )
    assert replies, "the worker did not confirm the revoke"
    app.send_task("z4j_test.add", (1, 2), task_id=revoked)
    unknown = app.send_task("z4j_test.not_registered").id

    def complete(events: list[dict[str, Any]]) -> bool:
        done = {(e["task_id"], e["kind"]) for e in events}
        return {
            (ok, "task.succeeded"),
            (bad, "task.failed"),
            (flaky, "task.succeeded"),
            (expired, "task.revoked"),
            (revoked, "task.revoked"),
            (unknown, "task.rejected"),
        } <= done and any(e["kind"] == "worker.heartbeat" for e in events)

    wait_for(path, complete, "the task events", process, log)
    process.send_signal(signal.SIGTERM)
    process.wait(20)
    events = read_events(path)
    dump = json.dumps(events)
    assert PASSWORD not in dump
    assert API_KEY not in dump
    assert len({e["id"] for e in events}) == len(events)

    success = _by_task(events, ok)
    assert set(success) == {"task.sent", "task.received", "task.started", "task.succeeded"}
    sent, started = success["task.sent"][0], success["task.started"][0]
    assert sent["kwargs"] == {"password": "[redacted]"}
    assert sent["args"] == [2, 3]
    assert sent["queue"] == started["queue"]
    assert sent["task_name"] == "z4j_test.add"
    assert started["kwargs"] == {"password": "[redacted]"}
    assert started["worker"]
    done = success["task.succeeded"][0]
    assert done["runtime_ms"] >= 40
    assert "'sum': 5" in done["result"]
    assert "password=[redacted]" in done["result"]

    failure = _by_task(events, bad)["task.failed"][0]
    assert failure["exception"]["type"] == "ValueError"
    assert "bob:[redacted]@db.example" in failure["exception"]["message"]
    assert "Traceback (most recent call last)" in failure["traceback"]
    assert "ValueError" in failure["traceback"]
    assert failure["runtime_ms"] is not None

    retry = _by_task(events, flaky)
    assert len(retry["task.started"]) == 2
    assert len(retry["task.sent"]) == 2
    assert retry["task.retried"][0]["retry_count"] == 0
    assert retry["task.retried"][0]["exception"]["type"] == "ConnectionError"
    assert retry["task.succeeded"][0]["retry_count"] == 1

    assert _by_task(events, expired)["task.revoked"][0]["expired"] is True
    gone = _by_task(events, revoked)["task.revoked"][0]
    assert (gone["expired"], gone["terminated"], gone["reason"]) == (False, False, "revoked")
    assert "task.started" not in _by_task(events, revoked)

    rejected = _by_task(events, unknown)["task.rejected"][0]
    assert (rejected["task_name"], rejected["reason"]) == (
        "z4j_test.not_registered",
        "unknown task",
    )

    workers = [e for e in events if e["kind"].startswith("worker.")]
    assert workers[0]["kind"] == "worker.online"
    assert workers[-1]["kind"] == "worker.offline"
    assert workers[0]["data"]["pool"] == worker["pool"]


def test_task_sent_is_stamped_when_publishing_begins(tmp_path: Path) -> None:
    """A worker can start a task before the broker's answer reaches the publisher; the sent
    event carries the moment publishing began, so it never follows ``started`` on one clock."""
    app = _make_app()("memory://", "z4j-stamp")
    seen: dict[str, str] = {}

    def slow_broker(**_: Any) -> None:  # connected before the agent
        seen["broker_answered"] = utc_iso()
        time.sleep(0.05)

    signals.after_task_publish.connect(slow_broker, weak=False)
    path = tmp_path / "producer.sqlite3"
    install(
        app,
        AgentConfig(
            brain_url="http://127.0.0.1:9", token="t", hmac_secret=SECRET, buffer_path=path
        ),
    )
    try:
        first = app.tasks["z4j_test.add"].delay(1, 2).id
        second = app.send_task("z4j_test.add", (3, 4)).id
    finally:
        uninstall(timeout=0.1)
        signals.after_task_publish.disconnect(slow_broker)
        app.close()
    sent = {e["task_id"]: e for e in read_events(path) if e["kind"] == "task.sent"}
    assert set(sent) == {first, second}
    # utc_iso strings of one format sort as the moments they name.
    assert sent[second]["occurred_at"] < seen["broker_answered"]
    assert sent[first]["occurred_at"] < sent[second]["occurred_at"]
