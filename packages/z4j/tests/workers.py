"""The Celery workers the end-to-end tests start in a process group of their own, and the keys
their queues leave in Redis."""

from __future__ import annotations

import os
import signal
import subprocess

import redis


def stop_worker(worker: subprocess.Popen[bytes], sig: int = signal.SIGTERM) -> None:
    """``sig`` to the worker's process group, SIGKILL if it has not ended 20 s later."""
    if worker.poll() is None:
        os.killpg(worker.pid, sig)
        try:
            worker.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(worker.pid, signal.SIGKILL)
            worker.wait(10)


def forget_redis_queue(broker: str, queue: str) -> None:
    """Kombu keeps a binding key per queue name in Redis."""
    client = redis.Redis.from_url(broker)
    try:
        for key in client.scan_iter(match=f"*{queue}*"):
            client.delete(key)
    finally:
        client.close()
