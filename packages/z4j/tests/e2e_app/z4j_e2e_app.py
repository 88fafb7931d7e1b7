"""The Celery application of the end-to-end tests, without the agent.

``make_app`` builds the same app in the worker (``z4j_e2e_worker`` adds the agent) and in the
test process, which publishes the tasks. Every test uses a queue of its own.
"""

from __future__ import annotations

import time
from typing import Any

from celery import Celery
from kombu import Exchange, Queue


class GatewayRefused(RuntimeError):
    """Raised by ``e2e.charge``: a failure whose type is qualified by this module."""


def refuse_at_gateway(order: str) -> None:
    # The failure test looks for this function's name in the stored traceback.
    raise GatewayRefused(f"gateway refused order {order}")


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

    @app.task(name="e2e.flaky", shared=False, bind=True, max_retries=3, default_retry_delay=0)
    def flaky(self: Any, marker: str, failures: int) -> str:
        """Fails ``failures`` times with a transient error, retrying each time, then succeeds."""
        if self.request.retries < failures:
            raise self.retry(exc=ConnectionError(f"transient {marker}"), countdown=0)
        return f"{marker} ok after {self.request.retries} retries"

    @app.task(name="e2e.login", shared=False)
    def login(user: str, note: str, password: str = "", comment: str = "") -> str:
        return f"{user} signed in"

    @app.task(name="e2e.sleep", shared=False)
    def sleep(seconds: float) -> str:
        time.sleep(seconds)
        return "woke up"

    return app
