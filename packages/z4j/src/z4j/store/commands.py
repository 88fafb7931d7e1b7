"""Commands: the ``commands`` table (migration 0020), its lifecycle transitions and the queries
the delivery pumps and the timeout sweeper run.

Every transition names the statuses it leaves from, so a late ack, a duplicate result or a
result after the deadline never moves a command backwards (the rule is
``z4j.domain.commands.OPEN``).
"""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta
from typing import Any

from platformkit.db.scope import Conn
from platformkit.ids import uuid7
from psycopg.types.json import Jsonb

from z4j.domain.commands import OPEN

COMMANDS_CHANNEL = "z4j_commands"
_COLUMNS = """id, project_id, agent_id, task_id, action, target, parameters, status, result,
    error, issued_by, timeout_seconds, deadline_at, sent_at, acknowledged_at, finished_at,
    created_at, updated_at, bulk_id"""
_OPEN = list(OPEN)


async def create(
    conn: Conn,
    *,
    project_id: uuid.UUID,
    agent_id: uuid.UUID,
    action: str,
    target: dict[str, Any],
    parameters: dict[str, Any],
    timeout_seconds: int,
    issued_by: uuid.UUID | None,
    task_id: uuid.UUID | None = None,
    bulk_id: uuid.UUID | None = None,
    now: datetime,
) -> dict[str, Any]:
    cur = await conn.execute(
        f"""INSERT INTO commands (id, project_id, agent_id, task_id, action, target, parameters,
               issued_by, timeout_seconds, deadline_at, created_at, updated_at, bulk_id)
           VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s) RETURNING {_COLUMNS}""",
        (
            uuid7(),
            project_id,
            agent_id,
            task_id,
            action,
            Jsonb(target),
            Jsonb(parameters),
            issued_by,
            timeout_seconds,
            now + timedelta(seconds=timeout_seconds),
            now,
            now,
            bulk_id,
        ),
    )
    row = await cur.fetchone()
    assert row is not None
    # Delivered at commit: every brain process hears it and the one holding a connection of
    # this agent sends the command (z4j.controllers.commands).
    await conn.execute("SELECT pg_notify(%s, %s)", (COMMANDS_CHANNEL, str(agent_id)))
    return row


async def get(conn: Conn, project_id: uuid.UUID, command_id: uuid.UUID) -> dict[str, Any] | None:
    cur = await conn.execute(
        f"SELECT {_COLUMNS} FROM commands WHERE project_id = %s AND id = %s",
        (project_id, command_id),
    )
    return await cur.fetchone()


async def list_for_project(
    conn: Conn, project_id: uuid.UUID, limit: int, task_id: uuid.UUID | None = None
) -> list[dict[str, Any]]:
    where = "project_id = %s" + (" AND task_id = %s" if task_id is not None else "")
    params: tuple[Any, ...] = (project_id, task_id) if task_id is not None else (project_id,)
    cur = await conn.execute(
        f"SELECT {_COLUMNS} FROM commands WHERE {where} ORDER BY created_at DESC LIMIT %s",
        (*params, limit),
    )
    return await cur.fetchall()


async def claim(conn: Conn, agent_id: uuid.UUID, limit: int, now: datetime) -> list[dict[str, Any]]:
    """Mark the oldest queued, unexpired commands of an agent sent and return them; two
    connections (or two brain processes) never claim the same one."""
    cur = await conn.execute(
        f"""UPDATE commands SET status = 'sent', sent_at = %s, updated_at = %s
            WHERE id IN (SELECT id FROM commands WHERE agent_id = %s AND status = 'queued'
                         AND deadline_at > %s ORDER BY created_at LIMIT %s
                         FOR UPDATE SKIP LOCKED)
            RETURNING {_COLUMNS}""",
        (now, now, agent_id, now, limit),
    )
    return sorted(await cur.fetchall(), key=lambda r: r["created_at"])


async def acknowledge(
    conn: Conn, agent_id: uuid.UUID, command_id: uuid.UUID, now: datetime
) -> bool:
    cur = await conn.execute(
        """UPDATE commands SET status = 'acknowledged', acknowledged_at = %s, updated_at = %s
           WHERE id = %s AND agent_id = %s AND status IN ('queued', 'sent')""",
        (now, now, command_id, agent_id),
    )
    return cur.rowcount == 1


async def finish(
    conn: Conn,
    agent_id: uuid.UUID,
    command_id: uuid.UUID,
    *,
    succeeded: bool,
    result: dict[str, Any] | None,
    error: str | None,
    now: datetime,
) -> dict[str, Any] | None:
    """Record the agent's result on an open command; None when it is not open (any more)."""
    cur = await conn.execute(
        f"""UPDATE commands SET status = %s, result = %s, error = %s, finished_at = %s,
               acknowledged_at = COALESCE(acknowledged_at, %s), updated_at = %s
            WHERE id = %s AND agent_id = %s AND status = ANY(%s::command_status[])
            RETURNING {_COLUMNS}""",
        (
            "succeeded" if succeeded else "failed",
            Jsonb(result) if result is not None else None,
            error,
            now,
            now,
            now,
            command_id,
            agent_id,
            _OPEN,
        ),
    )
    return await cur.fetchone()


async def time_out_expired(conn: Conn, now: datetime, limit: int = 500) -> list[dict[str, Any]]:
    """Platform scope: open commands past their deadline become timed_out."""
    cur = await conn.execute(
        f"""UPDATE commands SET status = 'timed_out', finished_at = %s, updated_at = %s,
               error = COALESCE(error, 'no result from the agent before the deadline')
            WHERE id IN (SELECT id FROM commands WHERE status = ANY(%s::command_status[])
                         AND deadline_at <= %s ORDER BY deadline_at LIMIT %s
                         FOR UPDATE SKIP LOCKED)
            RETURNING {_COLUMNS}""",
        (now, now, _OPEN, now, limit),
    )
    return await cur.fetchall()


async def link_retry(
    conn: Conn,
    project_id: uuid.UUID,
    original_id: uuid.UUID,
    new_id: uuid.UUID,
    new_engine_task_id: str,
    now: datetime,
) -> None:
    """``tasks.retried_as`` of the original names the new task. The new task's row is made
    here when its events have not arrived yet (pending, with the original's name and queue);
    the ingest upsert fills it in as they come."""
    await conn.execute(
        """INSERT INTO tasks (id, project_id, agent_id, engine, engine_task_id, name, queue,
               state, args_redacted, kwargs_redacted, created_at, updated_at)
           SELECT %s, project_id, agent_id, engine, %s, name, queue, 'pending', args_redacted,
                  kwargs_redacted, %s, %s
           FROM tasks WHERE project_id = %s AND id = %s
           ON CONFLICT (id) DO NOTHING""",
        (new_id, new_engine_task_id, now, now, project_id, original_id),
    )
    await conn.execute(
        "UPDATE tasks SET retried_as = %s, updated_at = %s WHERE project_id = %s AND id = %s",
        (new_id, now, project_id, original_id),
    )


async def retry_of(conn: Conn, project_id: uuid.UUID, task_id: uuid.UUID) -> uuid.UUID | None:
    """The task whose ``retried_as`` is ``task_id``, if any."""
    cur = await conn.execute(
        "SELECT id FROM tasks WHERE project_id = %s AND retried_as = %s LIMIT 1",
        (project_id, task_id),
    )
    row = await cur.fetchone()
    return None if row is None else uuid.UUID(str(row["id"]))


async def lock_read(conn: Conn, project_id: uuid.UUID, action: str) -> None:
    """Until commit: one transaction at a time finds or issues this project's read."""
    await conn.execute(
        "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))",
        (f"z4j.read:{project_id}:{action}",),
    )


async def recent_read(
    conn: Conn, project_id: uuid.UUID, action: str, since: datetime
) -> dict[str, Any] | None:
    """The newest ``action`` of the project created at or after ``since`` that has not failed
    or timed out (``commands_project_created`` finds it)."""
    cur = await conn.execute(
        f"""SELECT {_COLUMNS} FROM commands
           WHERE project_id = %s AND created_at >= %s AND action = %s
             AND status NOT IN ('failed', 'timed_out')
           ORDER BY created_at DESC LIMIT 1""",
        (project_id, since, action),
    )
    return await cur.fetchone()


async def queue_rates(conn: Conn, project_id: uuid.UUID, minutes: int) -> list[dict[str, Any]]:
    """Per queue, over the last ``minutes``: tasks enqueued, succeeded and failed."""
    cur = await conn.execute(
        """SELECT queue,
                  count(*) FILTER (WHERE enqueued_at >= now() - make_interval(mins => %s))
                      AS enqueued,
                  count(*) FILTER (WHERE state = 'succeeded'
                      AND finished_at >= now() - make_interval(mins => %s)) AS succeeded,
                  count(*) FILTER (WHERE state = 'failed'
                      AND finished_at >= now() - make_interval(mins => %s)) AS failed
           FROM tasks WHERE project_id = %s AND queue IS NOT NULL
             AND created_at >= now() - make_interval(mins => %s)
           GROUP BY queue ORDER BY queue""",
        (minutes, minutes, minutes, project_id, minutes),
    )
    return await cur.fetchall()


async def worker_outcomes(conn: Conn, project_id: uuid.UUID, hours: int) -> dict[str, Any]:
    """Per worker, over the last ``hours``: tasks succeeded and failed as the brain saw them."""
    cur = await conn.execute(
        """SELECT worker, count(*) FILTER (WHERE state = 'succeeded') AS succeeded,
                  count(*) FILTER (WHERE state = 'failed') AS failed
           FROM tasks WHERE project_id = %s AND worker IS NOT NULL
             AND created_at >= now() - make_interval(hours => %s)
           GROUP BY worker""",
        (project_id, hours),
    )
    return {row["worker"]: row for row in await cur.fetchall()}
