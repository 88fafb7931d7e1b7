"""Issuing commands to agents, and recording what the agents answer.

``issue`` is the one write path for every command: it checks the caller's role for the action,
picks the agent that carries it (the task's own agent for task commands, else an online agent
of the project) and refuses unless that agent advertised the action in its ``hello``. The
command row and its audit entry (``task.retry``, ``queue.purge``...) commit together; the
``pg_notify`` in the same transaction wakes, at commit, whichever brain process holds a
connection of that agent (``z4j.controllers.commands``).
"""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from platformkit.db.scope import Conn

from z4j.actions import audit
from z4j.actions.access import access_project, project_scope
from z4j.actions.context import Ctx
from z4j.actions.errors import (
    CommandNotFound,
    CommandNotOffered,
    ConfirmationMismatch,
    InvalidInput,
    TaskNotFound,
)
from z4j.domain import commands as rules
from z4j.domain.roles import Permission
from z4j.store import agents as agent_store
from z4j.store import commands as command_store
from z4j.store import tasks_read

Row = dict[str, Any]


def _checked[T](value: T, check: Any) -> T:
    try:
        checked: T = check(value)
    except rules.CommandRuleError as exc:
        raise InvalidInput(str(exc), field=exc.field) from None
    return checked


async def _may(ctx: Ctx, project_id: uuid.UUID, action: str) -> None:
    """The permission check ahead of the parameters' rules: someone who may not issue the
    command gets 403, never a 422 that reads their input."""
    await access_project(ctx, project_id, rules.ACTIONS[action].permission)


async def _pick_agent(
    conn: Conn, project_id: uuid.UUID, action: str, agent_id: uuid.UUID | None, engine: str | None
) -> Row:
    agents = await agent_store.list_for_project(conn, project_id)
    if agent_id is not None:
        agents = [a for a in agents if a["id"] == agent_id]
    offering = [a for a in agents if rules.advertised(a["capabilities"], action, engine)]
    if not offering:
        raise CommandNotOffered(f"No agent of this project advertised {action!r}.", action=action)
    # An online agent first, then the one heard from last.
    offering.sort(
        key=lambda a: (
            a["state"] == "online",
            a["last_seen_at"] or datetime.min.replace(tzinfo=UTC),
        ),
        reverse=True,
    )
    return offering[0]


async def issue(
    ctx: Ctx,
    project_id: uuid.UUID,
    action: str,
    *,
    target: dict[str, Any],
    parameters: dict[str, Any],
    details: dict[str, Any],
    target_id: uuid.UUID | None = None,
    task: Row | None = None,
    agent_id: uuid.UUID | None = None,
    timeout_seconds: int = rules.DEFAULT_TIMEOUT_SECONDS,
) -> Row:
    spec = rules.ACTIONS[action]
    async with project_scope(ctx, project_id, spec.permission) as (conn, _access):
        timeout_seconds = _checked(timeout_seconds, rules.check_timeout)
        return await _issue_in(
            conn,
            ctx,
            project_id,
            action,
            target,
            parameters,
            details,
            target_id,
            task,
            agent_id,
            timeout_seconds,
        )


async def _issue_in(
    conn: Conn,
    ctx: Ctx,
    project_id: uuid.UUID,
    action: str,
    target: dict[str, Any],
    parameters: dict[str, Any],
    details: dict[str, Any],
    target_id: uuid.UUID | None,
    task: Row | None,
    agent_id: uuid.UUID | None,
    timeout_seconds: int,
) -> Row:
    spec = rules.ACTIONS[action]
    engine = task["engine"] if task is not None else None
    if task is not None and task["agent_id"] is not None and agent_id is None:
        agent_id = task["agent_id"]
    agent = await _pick_agent(conn, project_id, action, agent_id, engine)
    row = await command_store.create(
        conn,
        project_id=project_id,
        agent_id=agent["id"],
        action=action,
        target=target,
        parameters=parameters,
        timeout_seconds=timeout_seconds,
        issued_by=ctx.actor_id,
        task_id=task["id"] if task is not None else None,
        now=datetime.now(UTC),
    )
    if spec.audit is None:
        return row
    await audit.record(
        conn,
        ctx.brain,
        spec.audit,
        actor=ctx.actor_id,
        project_id=project_id,
        target_type=spec.target_type,
        target_id=target_id if target_id is not None else row["id"],
        details={"command_id": str(row["id"]), "agent_id": str(agent["id"]), **details},
    )
    return row


async def _task(conn: Conn, project_id: uuid.UUID, task_id: uuid.UUID) -> Row:
    task = await tasks_read.get_task(conn, project_id, task_id)
    if task is None or not task.get("engine_task_id"):
        raise TaskNotFound(task_id=str(task_id))
    return task


async def retry_task(
    ctx: Ctx,
    project_id: uuid.UUID,
    task_id: uuid.UUID,
    *,
    override_args: list[Any] | None = None,
    override_kwargs: dict[str, Any] | None = None,
    timeout_seconds: int = rules.DEFAULT_TIMEOUT_SECONDS,
) -> Row:
    """Run the task again with its original arguments (which the agent reads from the result
    backend, never from the brain's redacted copy) or with explicit overrides."""
    async with project_scope(ctx, project_id, Permission.TASK_RETRY) as (conn, _access):
        task = await _task(conn, project_id, task_id)
        parameters: dict[str, Any] = {
            "task_id": task["engine_task_id"],
            "task_name": task["name"],
        }
        if override_args is not None:
            parameters["override_args"] = override_args
        if override_kwargs is not None:
            parameters["override_kwargs"] = override_kwargs
        return await _issue_in(
            conn,
            ctx,
            project_id,
            "retry_task",
            {"task_id": task["engine_task_id"], "engine": task["engine"]},
            parameters,
            {
                "task_id": str(task_id),
                "engine_task_id": task["engine_task_id"],
                "task_name": task["name"],
                "overrides": override_args is not None or override_kwargs is not None,
            },
            task_id,
            task,
            None,
            _checked(timeout_seconds, rules.check_timeout),
        )


async def cancel_task(
    ctx: Ctx,
    project_id: uuid.UUID,
    task_id: uuid.UUID,
    *,
    terminate: bool = False,
    timeout_seconds: int = rules.DEFAULT_TIMEOUT_SECONDS,
) -> Row:
    """Revoke the task; with ``terminate`` a running one is stopped with SIGTERM."""
    async with project_scope(ctx, project_id, Permission.TASK_CANCEL) as (conn, _access):
        task = await _task(conn, project_id, task_id)
        return await _issue_in(
            conn,
            ctx,
            project_id,
            "cancel_task",
            {"task_id": task["engine_task_id"], "engine": task["engine"]},
            {"task_id": task["engine_task_id"], "terminate": terminate, "signal": "SIGTERM"},
            {
                "task_id": str(task_id),
                "engine_task_id": task["engine_task_id"],
                "task_name": task["name"],
                "terminate": terminate,
            },
            task_id,
            task,
            None,
            _checked(timeout_seconds, rules.check_timeout),
        )


async def purge_queue(
    ctx: Ctx,
    project_id: uuid.UUID,
    queue: str,
    confirm: str,
    *,
    expected_depth: int | None = None,
) -> Row:
    """Delete every message waiting in ``queue``; ``confirm`` must repeat the queue's name.

    With ``expected_depth`` (what the operator saw) the agent purges only while the queue
    still holds that many: the parameters carry it and ``confirm_token``, the HMAC under the
    project secret of ``purge|<queue>|<depth>`` that the z4j-celery agent checks."""
    await _may(ctx, project_id, "purge_queue")
    queue = _checked(queue, rules.check_queue)
    if confirm != queue:
        raise ConfirmationMismatch("Type the queue's name exactly to purge it.", field="confirm")
    parameters: dict[str, Any] = {"queue": queue}
    if expected_depth is not None:
        secret = ctx.brain.secrets.project_secret(project_id)
        parameters["expected_depth"] = expected_depth
        parameters["confirm_token"] = rules.purge_confirm_token(secret, queue, expected_depth)
    return await issue(
        ctx,
        project_id,
        "purge_queue",
        target={"queue": queue},
        parameters=parameters,
        details={"queue": queue, "expected_depth": expected_depth},
    )


async def rate_limit(
    ctx: Ctx, project_id: uuid.UUID, task_name: str, rate: str, worker: str | None = None
) -> Row:
    await _may(ctx, project_id, "rate_limit")
    task_name = _checked(task_name, rules.check_task_name)
    rate = _checked(rate, rules.check_rate)
    parameters: dict[str, Any] = {"task_name": task_name, "rate": rate}
    if worker:
        parameters["worker_name"] = _checked(worker, rules.check_worker)
    return await issue(
        ctx,
        project_id,
        "rate_limit",
        target={"task_name": task_name},
        parameters=parameters,
        details=dict(parameters),
    )


async def resize_pool(ctx: Ctx, project_id: uuid.UUID, worker: str, delta: int) -> Row:
    """Grow (``delta`` > 0) or shrink (< 0) a worker's pool by ``abs(delta)`` processes."""
    await _may(ctx, project_id, "pool_grow")
    worker = _checked(worker, rules.check_worker)
    size = _checked(abs(delta), rules.check_delta)
    action = "pool_grow" if delta > 0 else "pool_shrink"
    return await issue(
        ctx,
        project_id,
        action,
        target={"id": worker, "worker_name": worker},
        parameters={"worker_name": worker, "delta": size},
        details={"worker": worker, "delta": size},
    )


async def restart_worker(ctx: Ctx, project_id: uuid.UUID, worker: str) -> Row:
    await _may(ctx, project_id, "restart_worker")
    worker = _checked(worker, rules.check_worker)
    return await issue(
        ctx,
        project_id,
        "restart_worker",
        target={"id": worker, "worker_name": worker},
        parameters={"worker_name": worker},
        details={"worker": worker},
    )


async def access_command(ctx: Ctx, project_id: uuid.UUID, command_id: uuid.UUID) -> Row:
    async with project_scope(ctx, project_id) as (conn, _access):
        row = await command_store.get(conn, project_id, command_id)
    if row is None:
        raise CommandNotFound(command_id=str(command_id))
    return row


async def list_commands(
    ctx: Ctx, project_id: uuid.UUID, task_id: uuid.UUID | None = None, limit: int = 50
) -> list[Row]:
    async with project_scope(ctx, project_id) as (conn, _access):
        return await command_store.list_for_project(conn, project_id, limit, task_id)


READ_REUSE_SECONDS = 10


async def read_through_agent(
    ctx: Ctx, project_id: uuid.UUID, action: str, within: float = 8.0
) -> Row | None:
    """Issue a read (``inspect_queues``, ``inspect_workers``) and wait up to ``within`` seconds
    for its result; the command row as it then stands, or None when no agent offers it.

    A read of the same project issued in the last ``READ_REUSE_SECONDS`` that has not failed
    or timed out is reused (its result, or the wait for it) instead of storing another
    command, so page loads, reloads and the API's polling cost one read per window. Finding
    it and issuing happen under a transaction lock per project and read, so loads arriving
    together, on any replica, share one command."""
    spec = rules.ACTIONS[action]
    now = datetime.now(UTC)
    try:
        async with project_scope(ctx, project_id, spec.permission) as (conn, _access):
            await command_store.lock_read(conn, project_id, action)
            row = await command_store.recent_read(
                conn, project_id, action, now - timedelta(seconds=READ_REUSE_SECONDS)
            )
            if row is None:
                row = await _issue_in(conn, ctx, project_id, action, {}, {}, {}, None, None,
                                      None, max(1, int(within)))  # fmt: skip
    except CommandNotOffered:
        return None
    deadline = asyncio.get_running_loop().time() + within
    while row["status"] in rules.OPEN and asyncio.get_running_loop().time() < deadline:
        await asyncio.sleep(0.2)
        row = await access_command(ctx, project_id, row["id"])
    return row


RATE_MINUTES = 5
OUTCOME_HOURS = 24


async def queue_overview(ctx: Ctx, project_id: uuid.UUID) -> tuple[Row | None, list[Row]]:
    """Per queue: depth and consumers read through an agent now (``inspect_queues``), and
    the tasks enqueued, succeeded and failed in the last ``RATE_MINUTES`` as recorded."""
    read = await read_through_agent(ctx, project_id, "inspect_queues")
    async with project_scope(ctx, project_id) as (conn, _access):
        rates = {
            r["queue"]: r for r in await command_store.queue_rates(conn, project_id, RATE_MINUTES)
        }
    live = {q["queue"]: q for q in ((read or {}).get("result") or {}).get("queues", [])}
    rows = []
    for name in sorted(set(live) | set(rates)):
        rate = rates.get(name, {})
        rows.append({"queue": name, "depth": live.get(name, {}).get("depth"),
                     "consumers": live.get(name, {}).get("consumers"),
                     "enqueued": rate.get("enqueued", 0), "succeeded": rate.get("succeeded", 0),
                     "failed": rate.get("failed", 0)})  # fmt: skip
    return read, rows


async def worker_overview(ctx: Ctx, project_id: uuid.UUID) -> tuple[Row | None, list[Row]]:
    """Per worker: pool, concurrency, processes, active and processed read through an agent
    now (``inspect_workers``), and its tasks succeeded and failed in the last
    ``OUTCOME_HOURS`` as recorded."""
    read = await read_through_agent(ctx, project_id, "inspect_workers")
    async with project_scope(ctx, project_id) as (conn, _access):
        outcomes = await command_store.worker_outcomes(conn, project_id, OUTCOME_HOURS)
    live = {w["worker"]: w for w in ((read or {}).get("result") or {}).get("workers", [])}
    rows = []
    for name in sorted(set(live) | set(outcomes)):
        w, seen = live.get(name, {}), outcomes.get(name, {})
        rows.append({"worker": name, "pool": w.get("pool"), "concurrency": w.get("concurrency"),
                     "processes": w.get("processes"), "active": w.get("active"),
                     "processed": w.get("processed"), "succeeded": seen.get("succeeded", 0),
                     "failed": seen.get("failed", 0)})  # fmt: skip
    return read, rows
