"""Durable jobs on absurd and leader-per-shard loops on advisory locks.

- ``absurd_source()``: absurd's schema as a migration source for a system's migrator.
- ``Task``, ``spawn``, ``JobRunner``: register handlers, enqueue inside the caller's
  transaction, and run a queue's tasks in the server process.
- ``LeaderLoop``: run a periodic body on one replica per advisory-lock key.

See docs/platformkit/jobs.md.
"""

from absurd_sdk import AsyncTaskContext as TaskContext
from absurd_sdk import RetryStrategy

from platformkit.jobs.keys import LockKey, lock_namespace, shard_keys
from platformkit.jobs.leader import LeaderLoop
from platformkit.jobs.runner import JobRunner
from platformkit.jobs.schema import absurd_source, absurd_source_from, release_number
from platformkit.jobs.tasks import (
    DEFAULT_MAX_ATTEMPTS,
    DEFAULT_RETRY,
    Handler,
    JobsError,
    Spawned,
    Task,
    spawn,
)

__all__ = [
    "DEFAULT_MAX_ATTEMPTS",
    "DEFAULT_RETRY",
    "Handler",
    "JobRunner",
    "JobsError",
    "LeaderLoop",
    "LockKey",
    "RetryStrategy",
    "Spawned",
    "Task",
    "TaskContext",
    "absurd_source",
    "absurd_source_from",
    "lock_namespace",
    "release_number",
    "shard_keys",
    "spawn",
]
