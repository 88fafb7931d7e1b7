"""Tasks for the capture tests: one success, one failure, one retry. ``make_app`` builds the
app without the agent, so the test process can build the identical producer side."""

from __future__ import annotations

import time
from typing import Any

from celery import Celery
from kombu import Exchange, Queue


def make_app(broker: str, queue: str) -> Celery:
    app = Celery("z4j_test_app", broker=broker)
    app.conf.update(
        broker_connection_retry_on_startup=True,
        task_default_queue=queue,
        # Auto-delete: a test run leaves no queue or exchange behind in RabbitMQ.
        task_queues=[
            Queue(queue, Exchange(queue, auto_delete=True), routing_key=queue, auto_delete=True)
        ],
        worker_hijack_root_logger=False,
        worker_prefetch_multiplier=1,
    )

    @app.task(name="z4j_test.add", shared=False)
    def add(x: int, y: int, password: str = "") -> dict[str, Any]:
        time.sleep(0.05)
        return {"sum": x + y, "note": "connect with password=" + password}

    @app.task(name="z4j_test.fail", shared=False)
    def fail(api_key: str) -> None:
        raise ValueError(f"cannot reach https://bob:{api_key}@db.example/x with token={api_key}")

    @app.task(name="z4j_test.flaky", shared=False, bind=True, max_retries=2, default_retry_delay=0)
    def flaky(self: Any, marker: str) -> str:
        if self.request.retries == 0:
            raise self.retry(exc=ConnectionError(f"transient {marker}"), countdown=0)
        return f"ok after {self.request.retries}"

    return app
