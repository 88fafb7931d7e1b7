"""The Celery application of the end-to-end tests, without the agent.

``make_app`` builds the same app in the worker (``z4j_e2e_worker`` adds the agent) and in the
test process, which publishes the tasks. Every test uses a queue of its own.
"""

from __future__ import annotations

import time
from typing import Any

from celery import Celery, Task
from kombu import Exchange, Queue

# Retries wait this long, so the next attempt always starts after the worker recorded the retry
# (Celery republishes the task before it reports the retry; see SlowRetryHook).
RETRY_DELAY = 0.3


class GatewayRefused(RuntimeError):
    """Raised by ``e2e.charge``: a failure whose type is qualified by this module."""


def refuse_at_gateway(order: str) -> None:
    # The failure test looks for this function's name in the stored traceback.
    raise GatewayRefused(f"gateway refused order {order}")


class SlowRetryHook(Task):
    """An ``on_retry`` that takes a while, as one that writes to a database or a result backend
    does. Celery calls it after republishing the task and before the ``task_retry`` signal, so
    on a prefork pool the next attempt can finish before the retry is recorded."""

    def on_retry(self, *args: Any, **kwargs: Any) -> None:
        time.sleep(0.5)


def make_app(broker: str, queue: str) -> Celery:
    app = Celery("z4j_e2e_app", broker=broker)
    app.conf.update(
        broker_connection_retry_on_startup=True,
        # Without AMQP heartbeats a worker on RabbitMQ stops at once on SIGTERM; with them it
        # waits seconds for its next heartbeat tick (the solo pool about eight).
        broker_heartbeat=0,
        task_default_queue=queue,
        # Auto-delete: a run leaves no queue or exchange behind in RabbitMQ.
        task_queues=[
            Queue(queue, Exchange(queue, auto_delete=True), routing_key=queue, auto_delete=True)
        ],
        worker_hijack_root_logger=False,
        worker_prefetch_multiplier=1,
    )

    @app.task(name="e2e.add", shared=False)
    def add(x: int, y: int, pause: float = 0.0) -> int:
        time.sleep(pause)
        return x + y

    @app.task(name="e2e.charge", shared=False)
    def charge(order: str) -> None:
        refuse_at_gateway(order)

    @app.task(name="e2e.fail_verbosely", shared=False)
    def fail_verbosely(size: int) -> None:
        """A traceback longer than a plain string may be (16 KiB) but within its own bound."""
        raise ValueError("word " * (size // 5) + "end of the message")

    @app.task(name="e2e.flaky", shared=False, bind=True, max_retries=3)
    def flaky(self: Any, marker: str, failures: int) -> str:
        """Fails ``failures`` times with a transient error, retrying each time, then succeeds."""
        if self.request.retries < failures:
            raise self.retry(exc=ConnectionError(f"transient {marker}"), countdown=RETRY_DELAY)
        return f"{marker} ok after {self.request.retries} retries"

    @app.task(name="e2e.retry_slow_hook", shared=False, bind=True, base=SlowRetryHook)
    def retry_slow_hook(self: Any, marker: str) -> str:
        """Retries once at once, then succeeds."""
        if self.request.retries == 0:
            raise self.retry(exc=ConnectionError(f"transient {marker}"), countdown=0)
        return f"{marker} ok"

    @app.task(name="e2e.login", shared=False)
    def login(user: str, note: str, password: str = "", comment: str = "") -> str:
        return f"{user} signed in"

    @app.task(name="e2e.sleep", shared=False)
    def sleep(seconds: float) -> str:
        time.sleep(seconds)
        return "woke up"

    return app
