"""Carries bulk retries forward: for each running one, issue ``retry_task`` commands for its
next tasks while fewer than ``WINDOW`` of its commands are open, and mark it done once every
task has been handled and no command is open. Runs in the commands controller's leader loop
(one replica at a time), and every step re-reads the row under a lock, so repeating a step is
safe and a restart resumes at ``next_index``.

A task that is gone, has no engine id, or whose agent does not advertise ``retry_task`` is
skipped (counted, not retried).
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Any

from z4j.brain import Brain, signal_change
from z4j.domain.commands import DEFAULT_TIMEOUT_SECONDS, OPEN, advertised
from z4j.store import agents as agent_store
from z4j.store import bulk_retries as bulk_store
from z4j.store import commands as command_store
from z4j.store import tasks_read

log = logging.getLogger("z4j.bulk_retries")
WINDOW = 20


async def _step_one(brain: Brain, job: dict[str, Any]) -> None:
    project_id = job["project_id"]
    now = datetime.now(UTC)
    async with brain.project_tx(project_id) as conn:
        row = await bulk_store.lock(conn, job["id"])
        if row is None:
            return
        counts = await bulk_store.progress(conn, row["id"])
        open_now = sum(counts.get(s, 0) for s in OPEN)
        start = row["next_index"]
        batch = row["task_ids"][start : start + max(0, WINDOW - open_now)]
        agents: dict[Any, dict[str, Any] | None] = {}
        for task_id in batch:
            task = await tasks_read.get_task(conn, project_id, task_id)
            if task is None or not task.get("engine_task_id") or task["agent_id"] is None:
                continue
            if task["agent_id"] not in agents:
                agents[task["agent_id"]] = await agent_store.get(conn, project_id, task["agent_id"])
            agent = agents[task["agent_id"]]
            if agent is None or not advertised(agent["capabilities"], "retry_task", task["engine"]):
                continue
            await command_store.create(
                conn,
                project_id=project_id,
                agent_id=agent["id"],
                action="retry_task",
                target={"task_id": task["engine_task_id"], "engine": task["engine"]},
                parameters={"task_id": task["engine_task_id"], "task_name": task["name"]},
                timeout_seconds=DEFAULT_TIMEOUT_SECONDS,
                issued_by=row["created_by"],
                task_id=task["id"],
                bulk_id=row["id"],
                now=now,
            )
            open_now += 1
        if batch:
            await bulk_store.advance(conn, row["id"], start + len(batch), now)
        elif start >= len(row["task_ids"]) and open_now == 0:
            await bulk_store.finish(conn, row["id"], "done", now)
        await signal_change(conn)


async def step(brain: Brain) -> None:
    async with brain.platform_tx() as conn:
        jobs = await bulk_store.running(conn)
    for job in jobs:
        try:
            await _step_one(brain, job)
        except Exception:
            log.exception("bulk retry %s: step failed", job["id"])
