"""Celery integration. In the module that creates the Celery app::

    from z4j_agent.celery import install
    install(app)

Every process that imports that module captures what happens in it: producers record
``task.sent``; a worker records ``task.received``, ``task.revoked`` and ``task.rejected`` in its
main process and ``task.started``/``succeeded``/``failed``/``retried`` wherever the task runs.

Processes: all processes of one worker node append to one buffer file, ``worker-<nodename>``.
Prefork children are forked after ``worker_init``; each opens its own SQLite connection to that
file (the buffer does this by itself after a fork) and never ships. The main process starts the
transport at ``worker_ready`` and ships the events of every child, so an event is durable the
moment a child records it, survives the death of that child or a restart of the whole worker,
and a node keeps a single session with the brain. Solo, threads, gevent and eventlet pools run
tasks in the main process, where the same code applies. Processes that are not workers (web
servers, scripts) use ``producer-<app main>`` and start shipping on their first event.
"""

from __future__ import annotations

import atexit
import os
import socket
import threading
from typing import Any

import celery  # type: ignore[import-untyped]
from celery import signals

from z4j_agent.agent import Agent
from z4j_agent.celery_commands import celery_handlers
from z4j_agent.celery_tasks import TaskCapture
from z4j_agent.config import AgentConfig, load_config
from z4j_agent.events import utc_iso
from z4j_agent.identity import CELERY_CAPABILITIES, ProcessIdentity
from z4j_agent.shipper import CommandHandler

__all__ = ["install", "uninstall"]

SHUTDOWN_FLUSH_SECONDS = 5.0
_current: CeleryIntegration | None = None


def install(
    app: Any,
    config: AgentConfig | None = None,
    *,
    command_handlers: dict[str, CommandHandler] | None = None,
    worker_heartbeat_seconds: float = 30.0,
) -> Agent:
    """Capture the events of ``app`` and carry out the brain's commands on it
    (``z4j_agent.celery_commands``; ``command_handlers`` add to or replace those); the
    configuration comes from ``Z4J_*`` variables or ``app.conf.z4j_*`` unless given. Installing
    again replaces the previous installation."""
    global _current
    uninstall()
    agent = Agent(
        config or (lambda: load_config(celery_conf=app.conf)),
        command_handlers=celery_handlers(app) | (command_handlers or {}),
    )
    _current = CeleryIntegration(app, agent, worker_heartbeat_seconds)
    _current.connect()
    return agent


def uninstall(timeout: float = SHUTDOWN_FLUSH_SECONDS) -> None:
    """Disconnect from Celery's signals and stop shipping (after a best-effort flush)."""
    global _current
    if _current is not None:
        _current.disconnect()
        _current.agent.stop(timeout)
        _current = None


def _active_task_ids() -> list[str]:
    """The tasks this worker runs now, read in its main process: a prefork worker marks a
    request active when a pool child accepts it, whichever child that is."""
    from celery.worker import state  # type: ignore[import-untyped]

    for _ in range(3):  # the worker's thread may change the set while it is copied
        try:
            return sorted(str(request.id) for request in tuple(state.active_requests))
        except RuntimeError:
            continue
    raise RuntimeError("active requests kept changing")


class CeleryIntegration(TaskCapture):
    """Connects the agent to Celery's signals and follows the worker's process lifecycle."""

    def __init__(self, app: Any, agent: Agent, heartbeat_seconds: float) -> None:
        self.app = app
        self.agent = agent
        self.heartbeat_seconds = heartbeat_seconds
        self.role = "producer"
        self.main_pid = os.getpid()
        self.nodename: str | None = None
        self.started_at = utc_iso()
        self.pool: dict[str, Any] = {}
        self._started: dict[str, float] = {}
        self._publishing = threading.local()
        self._heartbeat_stop = threading.Event()
        agent.use_buffer(f"producer-{app.main or 'celery'}")
        agent.auto_ship = lambda: self._identity(
            f"producer.{app.main or 'celery'}@{socket.gethostname()}", "producer"
        )
        self._receivers = [
            (signals.before_task_publish, self.on_before_publish),
            (signals.after_task_publish, self.on_published),
            (signals.task_received, self.on_received),
            (signals.task_prerun, self.on_prerun),
            (signals.task_postrun, self.on_postrun),
            (signals.task_success, self.on_success),
            (signals.task_failure, self.on_failure),
            (signals.task_retry, self.on_retry),
            (signals.task_revoked, self.on_revoked),
            (signals.task_rejected, self.on_rejected),
            (signals.task_unknown, self.on_unknown),
            (signals.worker_init, self.on_worker_init),
            (signals.worker_process_init, self.on_process_init),
            (signals.worker_ready, self.on_worker_ready),
            (signals.worker_shutdown, self.on_worker_shutdown),
        ]

    def connect(self) -> None:
        for signal, receiver in self._receivers:
            signal.connect(receiver, weak=False)
        atexit.register(self.on_exit)

    def disconnect(self) -> None:
        for signal, receiver in self._receivers:
            signal.disconnect(receiver)
        atexit.unregister(self.on_exit)
        self._heartbeat_stop.set()

    def _identity(self, worker_id: str, role: str) -> ProcessIdentity:
        return ProcessIdentity(
            worker_id=worker_id,
            worker_role=role,
            started_at=self.started_at,
            framework_version=celery.__version__,
            active_tasks=_active_task_ids if role == "task" else None,
            # The hello advertises exactly the commands this agent carries out.
            capabilities=CELERY_CAPABILITIES + tuple(sorted(self.agent.command_handlers)),
        )

    # Worker lifecycle.
    def on_worker_init(self, sender: Any = None, **_: Any) -> None:
        self.role, self.main_pid, self.started_at = "task", os.getpid(), utc_iso()
        self.nodename = str(getattr(sender, "hostname", None) or f"celery@{socket.gethostname()}")
        pool_module = getattr(getattr(sender, "pool_cls", None), "__module__", "") or ""
        self.pool = {
            "pool": pool_module.rsplit(".", 1)[-1] or None,
            "concurrency": getattr(sender, "concurrency", None),
        }
        self.agent.auto_ship = None
        self.agent.use_buffer(f"worker-{self.nodename}")

    def on_process_init(self, **_: Any) -> None:
        if self.role == "task" and os.getpid() != self.main_pid:
            self.role = "pool"
            self._started.clear()
            self.agent.after_fork()

    def _worker_data(self) -> dict[str, Any]:
        return {
            "worker": self.nodename,
            "pid": os.getpid(),
            **self.pool,
            "celery_version": celery.__version__,
        }

    def on_worker_ready(self, **_: Any) -> None:
        if self.role != "task" or self.nodename is None:
            return
        self.agent.start_transport(self._identity(self.nodename, "task"))
        self.agent.record("worker.online", None, self._worker_data())
        self._heartbeat_stop.clear()
        threading.Thread(target=self._heartbeats, name="z4j-agent-heartbeat", daemon=True).start()

    def _heartbeats(self) -> None:
        while not self._heartbeat_stop.wait(self.heartbeat_seconds):
            self.agent.record("worker.heartbeat", None, self._worker_data())

    def on_worker_shutdown(self, **_: Any) -> None:
        if self.role != "task" or os.getpid() != self.main_pid:
            return
        self._heartbeat_stop.set()
        self.agent.record("worker.offline", None, self._worker_data())
        self.agent.stop(SHUTDOWN_FLUSH_SECONDS)

    def on_exit(self) -> None:
        if self.role == "producer":
            self.agent.stop(2.0)
