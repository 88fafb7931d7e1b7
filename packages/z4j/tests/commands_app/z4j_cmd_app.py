"""The Celery application of the command tests: a result backend with extended results (the
agents' retry reads the original arguments from it) and pool restarts allowed."""

from __future__ import annotations

import os
import time

from celery import Celery


def make_app() -> Celery:
    queue = os.environ["Z4J_CMD_QUEUE"]
    app = Celery(
        "z4j_cmd_app", broker=os.environ["Z4J_CMD_BROKER"], backend=os.environ["Z4J_CMD_BACKEND"]
    )
    app.conf.update(
        broker_connection_retry_on_startup=True,
        broker_heartbeat=0,
        task_default_queue=queue,
        result_extended=True,
        worker_pool_restarts=True,
        worker_hijack_root_logger=False,
        worker_prefetch_multiplier=1,
    )

    @app.task(name="cmd.add")
    def add(x: int, y: int) -> int:
        return x + y

    @app.task(name="cmd.sleep")
    def sleep(seconds: float) -> str:
        time.sleep(seconds)
        return "woke up"

    return app
