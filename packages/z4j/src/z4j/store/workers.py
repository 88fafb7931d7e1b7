"""Agent workers: one row per worker connection of an agent (``agent_workers``), keyed by the
hello's ``worker_id``; when the brain last heard from it and the tasks it last said it runs."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from platformkit.db.scope import Conn
from z4j_agent.protocol import MAX_ACTIVE_TASKS


def active_ids(payload: dict[str, Any]) -> list[str] | None:
    """The ``active_tasks`` of a hello or heartbeat, bounded; None when the agent sends none."""
    value = payload.get("active_tasks")
    if not isinstance(value, list):
        return None
    return [str(v)[:200] for v in value[:MAX_ACTIVE_TASKS] if isinstance(v, str) and v]


async def seen(
    conn: Conn,
    project_id: uuid.UUID,
    agent_id: uuid.UUID,
    worker_id: str,
    at: datetime,
    active: list[str] | None,
) -> None:
    """Record that the worker spoke at ``at``, with its active tasks when it reported them."""
    await conn.execute(
        """INSERT INTO agent_workers AS w (agent_id, worker_id, project_id, connected,
               last_seen_at, active_task_ids, active_reported_at)
           VALUES (%(agent)s, %(worker)s, %(project)s, true, %(at)s, %(active)s,
               CASE WHEN %(active)s::text[] IS NULL THEN NULL ELSE %(at)s::timestamptz END)
           ON CONFLICT (agent_id, worker_id) DO UPDATE SET
               connected = true,
               last_seen_at = GREATEST(w.last_seen_at, EXCLUDED.last_seen_at),
               active_task_ids = COALESCE(EXCLUDED.active_task_ids, w.active_task_ids),
               active_reported_at = COALESCE(EXCLUDED.active_reported_at, w.active_reported_at)""",
        {"agent": agent_id, "worker": worker_id, "project": project_id, "at": at, "active": active},
    )


async def disconnected(conn: Conn, agent_id: uuid.UUID, worker_id: str, at: datetime) -> None:
    """The worker's connection closed: its silence counts from now."""
    await conn.execute(
        "UPDATE agent_workers SET connected = false, last_seen_at = GREATEST(last_seen_at, %s) "
        "WHERE agent_id = %s AND worker_id = %s",
        (at, agent_id, worker_id),
    )


async def list_for_project(
    conn: Conn, project_id: uuid.UUID, silent_seconds: float
) -> list[dict[str, Any]]:
    """A connection counts as connected while it is open and spoke within ``silent_seconds``
    (an HTTP-fallback session has no close to record)."""
    cur = await conn.execute(
        "SELECT agent_id, worker_id, "
        "connected AND last_seen_at >= now() - make_interval(secs => %s) AS connected, "
        "last_seen_at, cardinality(active_task_ids) AS active_count, active_reported_at "
        "FROM agent_workers WHERE project_id = %s ORDER BY agent_id, last_seen_at DESC",
        (silent_seconds, project_id),
    )
    return await cur.fetchall()


async def prune(conn: Conn, silent_seconds: float) -> int:
    """Platform scope: forget workers silent this long (a live one speaks every few seconds;
    a z4j-celery worker gets a new id each time it starts). Returns how many."""
    cur = await conn.execute(
        "DELETE FROM agent_workers WHERE last_seen_at < now() - make_interval(secs => %s)",
        (silent_seconds,),
    )
    return cur.rowcount
