"""Lost tasks: the started tasks whose worker went silent, marked lost with a timeline row, and
lost tasks a worker reports running again, put back to started.

The sweep runs in platform scope (all projects) on one brain replica at a time
(``z4j.controllers.lost``); restoring runs in the reporting agent's project scope.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from platformkit.db.scope import Conn
from platformkit.ids import uuid7
from psycopg.types.json import Jsonb

# The worker that set the task's state when the brain knows it (agent_workers), else the agent,
# else (the agent was deleted) the task's own last change; and that worker's last active list.
_SILENCE = """
SELECT t.id, t.project_id, t.agent_id, t.engine_task_id, t.state::text AS state, t.state_at,
       t.state_attempt, t.state_worker_id, now() AS now,
       COALESCE(w.last_seen_at, a.last_seen_at, t.updated_at) AS last_seen,
       t.updated_at AS changed_at, w.active_reported_at AS listed_at,
       t.engine_task_id = ANY(w.active_task_ids) AS listed
FROM tasks t
LEFT JOIN agents a ON a.id = t.agent_id
LEFT JOIN agent_workers w ON w.agent_id = t.agent_id AND w.worker_id = t.state_worker_id
"""

_CANDIDATES = (
    _SILENCE
    + """WHERE t.state = 'started'
  AND (COALESCE(w.last_seen_at, a.last_seen_at, t.updated_at)
           < now() - make_interval(secs => %(grace)s)
       OR (w.active_reported_at > t.updated_at + make_interval(secs => %(grace)s)
           AND NOT t.engine_task_id = ANY(w.active_task_ids)))
ORDER BY t.updated_at LIMIT %(limit)s"""
)


async def candidates(conn: Conn, grace_seconds: float, limit: int) -> list[uuid.UUID]:
    """Platform scope: started tasks whose worker has been silent longer than the grace, or
    has stopped listing them since."""
    cur = await conn.execute(_CANDIDATES, {"grace": grace_seconds, "limit": limit})
    return [row["id"] for row in await cur.fetchall()]


async def lock_for_verdict(conn: Conn, task_id: uuid.UUID) -> dict[str, Any] | None:
    """The task with its worker's last contact, locked for the rest of the transaction."""
    cur = await conn.execute(_SILENCE + "WHERE t.id = %s FOR UPDATE OF t", (task_id,))
    return await cur.fetchone()


async def mark_lost(conn: Conn, row: dict[str, Any], reason: str) -> None:
    await conn.execute(
        "UPDATE tasks SET state = 'lost', finished_at = now(), updated_at = now() WHERE id = %s",
        (row["id"],),
    )
    await _timeline(
        conn,
        row,
        "lost",
        {
            "reason": reason,
            "worker": row["state_worker_id"],
            "last_seen_at": _iso(row["last_seen"]),
            "source": "brain",
        },
    )


async def restore_active(
    conn: Conn, project_id: uuid.UUID, agent_id: uuid.UUID, worker_id: str, active: list[str]
) -> int:
    """Lost tasks of this agent that ``worker_id`` reports running go back to started; their
    state's agent time and attempt stay, so later real events order as before."""
    if not active:
        return 0
    cur = await conn.execute(
        """UPDATE tasks SET state = 'started', finished_at = NULL, state_worker_id = %s,
               updated_at = now()
           WHERE project_id = %s AND agent_id = %s AND state = 'lost'
             AND engine_task_id = ANY(%s)
           RETURNING id, project_id, agent_id""",
        (worker_id, project_id, agent_id, active),
    )
    rows = await cur.fetchall()
    for row in rows:
        await _timeline(
            conn,
            row,
            "started",
            {
                "reason": f"worker {worker_id} reports the task running again",
                "worker": worker_id,
                "source": "brain",
            },
        )
    return len(rows)


async def _timeline(conn: Conn, row: dict[str, Any], event_type: str, payload: Any) -> None:
    await conn.execute(
        "INSERT INTO events (id, task_id, agent_id, project_id, event_type, ts, payload) "
        "VALUES (%s, %s, %s, %s, %s, now(), %s)",
        (uuid7(), row["id"], row["agent_id"], row["project_id"], event_type, Jsonb(payload)),
    )


def _iso(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()
