"""Commands to agents: the actions the brain issues, who may issue them, what their parameters
may hold, and the lifecycle of one command. Pure: no I/O.

Action names are the z4j agents' wire names (``retry_task``, ``cancel_task``...), so one
command frame serves our agent and the z4j-celery agent alike; the audit log names the same
operations in the dashboard's vocabulary (``task.retry``, ``queue.purge``...).
"""

from __future__ import annotations

import hashlib
import hmac
import re
from dataclasses import dataclass
from typing import Any

from z4j.domain.roles import Permission

OPEN = ("queued", "sent", "acknowledged")
FINAL = ("succeeded", "failed", "timed_out")
STATUSES = OPEN + FINAL
DEFAULT_TIMEOUT_SECONDS = 60
MAX_TIMEOUT_SECONDS = 3600
MAX_ERROR_CHARS = 8192
# Celery's rate strings: a number, optionally per second, minute or hour ("10/m", "0.5/s").
_RATE = re.compile(r"\d{1,9}(?:\.\d{1,6})?(?:/[smh])?")
_NAME = re.compile(r"[^\x00-\x1f\x7f]{1,500}")


@dataclass(frozen=True)
class ActionSpec:
    audit: str | None  # the audit log's action name; None for reads, which change nothing
    permission: Permission
    target_type: str


ACTIONS: dict[str, ActionSpec] = {
    "retry_task": ActionSpec("task.retry", Permission.TASK_RETRY, "task"),
    "cancel_task": ActionSpec("task.cancel", Permission.TASK_CANCEL, "task"),
    "purge_queue": ActionSpec("queue.purge", Permission.QUEUE_MANAGE, "queue"),
    "rate_limit": ActionSpec("task.rate_limit", Permission.QUEUE_MANAGE, "task_name"),
    "pool_grow": ActionSpec("worker.pool_grow", Permission.WORKER_MANAGE, "worker"),
    "pool_shrink": ActionSpec("worker.pool_shrink", Permission.WORKER_MANAGE, "worker"),
    "restart_worker": ActionSpec("worker.restart", Permission.WORKER_MANAGE, "worker"),
    # Reads through the agent, for the queues and workers pages (our agent offers them).
    "inspect_queues": ActionSpec(None, Permission.PROJECT_READ, "queue"),
    "inspect_workers": ActionSpec(None, Permission.PROJECT_READ, "worker"),
}


class CommandRuleError(ValueError):
    """A parameter breaks a rule; ``field`` names it."""

    def __init__(self, message: str, field: str) -> None:
        super().__init__(message)
        self.field = field


def advertised(capabilities: Any, action: str, engine: str | None = None) -> bool:
    """Whether an agent's stored ``capabilities`` ({engine: [action, ...]}) offer ``action``
    (for ``engine`` when given)."""
    if not isinstance(capabilities, dict):
        return False
    engines = [engine] if engine is not None else list(capabilities)
    return any(
        isinstance(capabilities.get(name), list) and action in capabilities[name]
        for name in engines
    )


def check_queue(queue: str) -> str:
    if not _NAME.fullmatch(queue) or len(queue) > 200:
        raise CommandRuleError("A queue name has 1 to 200 printable characters.", "queue")
    return queue


def check_task_name(name: str) -> str:
    if not _NAME.fullmatch(name):
        raise CommandRuleError("A task name has 1 to 500 printable characters.", "task_name")
    return name


def check_worker(name: str) -> str:
    if not _NAME.fullmatch(name) or len(name) > 200:
        raise CommandRuleError("A worker name has 1 to 200 printable characters.", "worker")
    return name


def check_rate(rate: str) -> str:
    """Celery's rate limit string; "0" lifts the limit."""
    if not _RATE.fullmatch(rate):
        raise CommandRuleError(
            "A rate is a number of tasks, optionally per s, m or h (e.g. 10/m).", "rate"
        )
    return rate


def check_delta(delta: int) -> int:
    if not 1 <= delta <= 64:
        raise CommandRuleError("A pool change is 1 to 64 processes.", "delta")
    return delta


def check_timeout(seconds: int) -> int:
    if not 1 <= seconds <= MAX_TIMEOUT_SECONDS:
        raise CommandRuleError(
            f"timeout_seconds is between 1 and {MAX_TIMEOUT_SECONDS}.", "timeout_seconds"
        )
    return seconds


def result_status(reported: Any) -> str | None:
    """The final status for an agent's ``command_result.status``: the z4j agents say
    ``success`` or ``failed``; ``succeeded`` is accepted as a synonym. None: not a result."""
    if reported in ("success", "succeeded"):
        return "succeeded"
    if reported in ("failed", "failure", "error"):
        return "failed"
    return None


def purge_confirm_token(secret: bytes, queue: str, depth: int) -> str:
    """The purge confirmation the z4j agents check: hex HMAC-SHA256 under the project secret
    of ``purge|<queue>|<depth>``."""
    return hmac.new(secret, f"purge|{queue}|{depth}".encode(), hashlib.sha256).hexdigest()
