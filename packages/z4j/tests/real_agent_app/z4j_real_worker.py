"""What the real z4j-celery agent's test workers load (``celery -A z4j_real_worker worker``).

Importing ``z4j_celery`` is the whole installation: it starts the agent when the worker is ready,
configured by the ``Z4J_*`` variables the brain's agents page lists. The app keeps extended
results in Redis, which the agent's ``retry_task`` reads the original arguments from.
"""

from __future__ import annotations

import os
import time
from typing import Any

import z4j_celery  # noqa: F401 - importing it installs the agent
from celery import Celery

app = Celery(
    "z4j_real_worker",
    broker=os.environ["Z4J_E2E_BROKER"],
    backend=os.environ["Z4J_E2E_BACKEND"],
)
app.conf.update(
    broker_connection_retry_on_startup=True,
    task_default_queue=os.environ["Z4J_E2E_QUEUE"],
    result_extended=True,
    worker_hijack_root_logger=False,
    worker_prefetch_multiplier=1,
)
# What -E does, in the configuration: the prefork tests run without -E and switch this on.
if os.environ.get("Z4J_E2E_TASK_EVENTS") == "1":
    app.conf.worker_send_task_events = True


@app.task(name="real.add")
def add(x: int, y: int) -> int:
    return x + y


@app.task(name="real.boom")
def boom(order: str) -> None:
    raise ValueError(f"gateway refused order {order}")


@app.task(name="real.flaky", bind=True, max_retries=3)
def flaky(self: Any, failures: int) -> str:
    if self.request.retries < failures:
        raise self.retry(exc=ConnectionError("transient"), countdown=0.2)
    return "ok"


@app.task(name="real.sleep")
def sleep(seconds: float) -> str:
    time.sleep(seconds)
    return "woke up"
