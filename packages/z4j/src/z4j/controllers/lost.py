"""Marks started tasks lost when their worker has been silent past the grace period or stopped
listing them, and forgets worker connections silent far longer than that.

Find, then act: the find reads candidate ids in a batch; each act re-reads the task and its
worker's last contact under a row lock and decides with ``z4j.domain.lost``, so repeating it, or
a worker that spoke in between, changes nothing. The loop runs on one replica per database
(``platformkit.jobs.LeaderLoop``, a PostgreSQL advisory lock), so two brains on one database do
the work once.
"""

from __future__ import annotations

import logging
import uuid
from datetime import timedelta

from platformkit.jobs import LeaderLoop, LockKey, shard_keys

from z4j.brain import Brain
from z4j.domain.lost import lost_reason
from z4j.domain.taskstate import TaskState
from z4j.store import lost as lost_store
from z4j.store import workers as worker_store

log = logging.getLogger("z4j.lost")

LOOP_NAME = "z4j.lost_tasks"
BATCH = 500
# A worker row outlives the grace period by far, so its tasks are judged by it, not the agent.
FORGET_WORKERS_AFTER_SECONDS = 86_400.0


async def act(brain: Brain, task_id: uuid.UUID) -> bool:
    """Mark one task lost if it still is; True when this call did."""
    grace = timedelta(seconds=brain.settings.lost_after_seconds)
    async with brain.platform_tx() as conn:
        row = await lost_store.lock_for_verdict(conn, task_id)
        if row is None:
            return False
        reason = lost_reason(
            TaskState(row["state"]),
            row["now"],
            row["last_seen"],
            grace,
            changed_at=row["changed_at"],
            listed_at=row["listed_at"],
            listed=row["listed"],
        )
        if reason is None:
            return False
        await lost_store.mark_lost(conn, row, reason)
    log.info("task %s (%s) lost: %s", row["engine_task_id"], task_id, reason)
    return True


async def sweep_once(brain: Brain) -> int:
    """One pass over every project; returns how many tasks became lost."""
    async with brain.platform_tx() as conn:
        found = await lost_store.candidates(conn, brain.settings.lost_after_seconds, BATCH)
    marked = 0
    for task_id in found:
        marked += await act(brain, task_id)
    async with brain.platform_tx() as conn:
        await worker_store.prune(
            conn, max(FORGET_WORKERS_AFTER_SECONDS, 10 * brain.settings.lost_after_seconds)
        )
    if marked:
        await brain.notify_change()
    return marked


def lost_tasks_loop(brain: Brain, conninfo: str) -> LeaderLoop:
    """The sweep on one replica per database, every ``lost_sweep_seconds``."""

    async def body(_key: LockKey) -> None:
        await sweep_once(brain)

    return LeaderLoop(conninfo, shard_keys(LOOP_NAME, 1), brain.settings.lost_sweep_seconds, body)
