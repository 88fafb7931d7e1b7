"""Retention SQL: expired tasks and events deleted in bounded batches, and each project's last
run recorded in ``project_retention``.

Every delete names at most ``limit`` rows of the table it deletes from (the rows are chosen
by a ``LIMIT`` subquery on an index: ``tasks_project_created`` for tasks, the BRIN index
``events_created_brin`` for events), so a statement holds its locks and writes its WAL for a
bounded number of rows and ingest is never queued behind it for long. Deleting a task also
deletes the events it still has (``ON DELETE CASCADE``); they are counted with the events.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from platformkit.db.scope import Conn

# A backlog is counted up to this many rows; more is shown as "at least".
BACKLOG_CAP = 100_000


async def projects(conn: Conn) -> list[tuple[uuid.UUID, dict[str, Any]]]:
    cur = await conn.execute("SELECT id, settings FROM projects ORDER BY id")
    return [(row["id"], row["settings"]) for row in await cur.fetchall()]


async def delete_events(conn: Conn, project_id: uuid.UUID, before: datetime, limit: int) -> int:
    cur = await conn.execute(
        "DELETE FROM events WHERE ctid = ANY(ARRAY(SELECT ctid FROM events"
        " WHERE created_at < %s AND project_id = %s LIMIT %s))",
        (before, project_id, limit),
    )
    return cur.rowcount


async def delete_tasks(
    conn: Conn, project_id: uuid.UUID, before: datetime, limit: int
) -> tuple[int, int]:
    """(tasks, their events) deleted. A task that names a deleted one as ``retried_as`` keeps
    its row with the reference cleared."""
    cur = await conn.execute(
        "WITH doomed AS (SELECT id FROM tasks WHERE project_id = %s AND created_at < %s"
        " ORDER BY created_at LIMIT %s),"
        " unlinked AS (UPDATE tasks SET retried_as = NULL WHERE retried_as IN"
        " (SELECT id FROM doomed) AND id NOT IN (SELECT id FROM doomed) RETURNING 1),"
        " cascaded AS (SELECT count(*) AS n FROM events WHERE task_id IN (SELECT id FROM doomed)),"
        " gone AS (DELETE FROM tasks WHERE id IN (SELECT id FROM doomed) RETURNING 1)"
        " SELECT (SELECT count(*) FROM gone) AS tasks, (SELECT n FROM cascaded) AS events,"
        " (SELECT count(*) FROM unlinked) AS unlinked",
        (project_id, before, limit),
    )
    row = await cur.fetchone()
    assert row is not None
    return int(row["tasks"]), int(row["events"])


async def backlog(
    conn: Conn, project_id: uuid.UUID, tasks_before: datetime, events_before: datetime
) -> int:
    """Expired tasks and events not yet deleted, each counted up to ``BACKLOG_CAP``."""
    cur = await conn.execute(
        "SELECT (SELECT count(*) FROM (SELECT 1 FROM tasks WHERE project_id = %(p)s"
        "   AND created_at < %(t)s LIMIT %(cap)s) t)"
        " + (SELECT count(*) FROM (SELECT 1 FROM events WHERE created_at < %(e)s"
        "   AND project_id = %(p)s LIMIT %(cap)s) e) AS n",
        {"p": project_id, "t": tasks_before, "e": events_before, "cap": BACKLOG_CAP},
    )
    row = await cur.fetchone()
    return int(row["n"]) if row else 0


async def record_run(conn: Conn, project_id: uuid.UUID, tasks: int, events: int, left: int) -> None:
    await conn.execute(
        "INSERT INTO project_retention AS r (project_id, last_run_at, tasks_deleted,"
        " events_deleted, backlog, total_deleted) VALUES (%(p)s, now(), %(t)s, %(e)s, %(b)s,"
        " %(t)s + %(e)s) ON CONFLICT (project_id) DO UPDATE SET last_run_at = now(),"
        " tasks_deleted = %(t)s, events_deleted = %(e)s, backlog = %(b)s,"
        " total_deleted = r.total_deleted + %(t)s + %(e)s",
        {"p": project_id, "t": tasks, "e": events, "b": left},
    )


async def last_run(conn: Conn, project_id: uuid.UUID) -> dict[str, Any] | None:
    cur = await conn.execute(
        "SELECT last_run_at, tasks_deleted, events_deleted, backlog, total_deleted"
        " FROM project_retention WHERE project_id = %s",
        (project_id,),
    )
    return await cur.fetchone()
