"""Bulk writes of folded event batches: one statement for tasks, one for events.

Both statements take their rows as one JSON document (``jsonb_to_recordset``), so a batch of
thousands of events costs two round trips and one JSON encoding each. The task upsert applies
the same ordering rule as ``z4j.domain.taskstate``: the state claim with the greater
(settled, attempt, agent time, rank) key wins, so replays and late arrivals never move a task
backwards.
"""

from __future__ import annotations

import uuid
from datetime import datetime

from platformkit import fastjson
from platformkit.db.scope import Conn
from psycopg.types.json import Jsonb

from z4j.domain.taskstate import UNKNOWN_ATTEMPT
from z4j.ingest.fold import Folded

_UPSERT_TASKS = """
INSERT INTO tasks AS t (id, project_id, agent_id, engine, engine_task_id, name, queue, state,
    state_at, state_attempt, args_redacted, kwargs_redacted, error, group_id, worker, enqueued_at,
    started_at, finished_at, runtime_ms, retries, state_worker_id)
SELECT u.id, %(project)s, %(agent)s, u.engine, u.engine_task_id, u.name, u.queue,
    COALESCE(u.state, 'pending'), u.state_at, u.state_attempt, u.args, u.kwargs, u.error,
    u.group_id, u.worker,
    u.enqueued_at, u.started_at, u.finished_at, u.runtime_ms, u.retries, %(worker)s
FROM jsonb_to_recordset(%(rows)s::jsonb)
    AS u(id uuid, engine text, engine_task_id text, name text, queue text, state task_state,
         state_at timestamptz, state_attempt int, args jsonb, kwargs jsonb, error jsonb,
         group_id text, worker text,
         enqueued_at timestamptz, started_at timestamptz, finished_at timestamptz,
         runtime_ms float8, retries int)
ON CONFLICT (id) DO UPDATE SET
    agent_id = COALESCE(EXCLUDED.agent_id, t.agent_id),
    name = COALESCE(t.name, EXCLUDED.name),
    queue = COALESCE(t.queue, EXCLUDED.queue),
    args_redacted = COALESCE(t.args_redacted, EXCLUDED.args_redacted),
    kwargs_redacted = COALESCE(t.kwargs_redacted, EXCLUDED.kwargs_redacted),
    group_id = COALESCE(t.group_id, EXCLUDED.group_id),
    worker = CASE WHEN {wins} THEN COALESCE(EXCLUDED.worker, t.worker)
                  ELSE COALESCE(t.worker, EXCLUDED.worker) END,
    enqueued_at = LEAST(t.enqueued_at, EXCLUDED.enqueued_at),
    started_at = GREATEST(t.started_at, EXCLUDED.started_at),
    retries = GREATEST(t.retries, EXCLUDED.retries),
    state = CASE WHEN {wins} THEN EXCLUDED.state ELSE t.state END,
    state_at = CASE WHEN {wins} THEN EXCLUDED.state_at ELSE t.state_at END,
    state_attempt = CASE WHEN {wins} THEN EXCLUDED.state_attempt ELSE t.state_attempt END,
    error = CASE WHEN {wins} THEN EXCLUDED.error ELSE t.error END,
    finished_at = CASE WHEN {wins} THEN EXCLUDED.finished_at ELSE t.finished_at END,
    runtime_ms = CASE WHEN {wins} THEN EXCLUDED.runtime_ms ELSE t.runtime_ms END,
    state_worker_id = CASE WHEN {wins} THEN EXCLUDED.state_worker_id ELSE t.state_worker_id END,
    updated_at = now()
""".replace(
    "{wins}",
    """(EXCLUDED.state_at IS NOT NULL AND (t.state_at IS NULL OR
        (EXCLUDED.state <> 'pending', EXCLUDED.state_attempt, EXCLUDED.state_at,
         z4j_state_rank(EXCLUDED.state))
        > (t.state <> 'pending', t.state_attempt, t.state_at, z4j_state_rank(t.state))))""",
)

_INSERT_EVENTS = """
INSERT INTO events (id, task_id, agent_id, project_id, event_type, ts, payload)
SELECT u.id, u.task_id, %(agent)s, %(project)s, u.event_type, u.ts, u.payload
FROM jsonb_to_recordset(%(rows)s::jsonb)
    AS u(id uuid, task_id uuid, event_type text, ts timestamptz, payload jsonb)
ON CONFLICT (id) DO NOTHING
"""


# For agents whose retry events carry no count, a task's retries are its retry events.
_COUNT_RETRIES = """
UPDATE tasks AS t SET retries = GREATEST(t.retries, (
    SELECT count(*) FROM events e WHERE e.task_id = t.id AND e.event_type = 'retry'))
WHERE t.id = ANY(%(ids)s::uuid[])
"""


def _iso(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()


async def write_folded(
    conn: Conn,
    project_id: uuid.UUID,
    agent_id: uuid.UUID | None,
    folded: Folded,
    worker_id: str | None = None,
) -> None:
    """Apply ``folded`` inside the caller's project-scoped transaction; ``worker_id`` is the
    agent worker whose connection sent it (``tasks.state_worker_id`` of the states it sets)."""
    # A fixed lock order keeps concurrent batches touching the same tasks from deadlocking.
    tasks = sorted(folded.tasks.values(), key=lambda t: t.id)
    if tasks:
        rows = [
            {
                "id": t.id,
                "engine": t.engine,
                "engine_task_id": t.engine_task_id,
                "name": t.name,
                "queue": t.queue,
                "state": t.claim[0].value if t.claim else None,
                "state_at": _iso(t.claim[1] if t.claim else None),
                "state_attempt": t.claim[2] if t.claim else UNKNOWN_ATTEMPT,
                "args": t.args,
                "kwargs": t.kwargs,
                "error": t.error,
                "group_id": t.group_id,
                "worker": t.worker,
                "enqueued_at": _iso(t.enqueued_at),
                "started_at": _iso(t.started_at),
                "finished_at": _iso(t.finished_at),
                "runtime_ms": t.runtime_ms,
                "retries": t.retries,
            }
            for t in tasks
        ]
        await conn.execute(
            _UPSERT_TASKS,
            {
                "project": project_id,
                "agent": agent_id,
                "worker": worker_id or None,
                "rows": Jsonb(rows, fastjson.dumps),
            },
        )
    if folded.events:
        # One JSON document for the whole column set: psycopg adapts it in a single dumps
        # instead of escaping hundreds of jsonb array elements one by one.
        rows = [
            {
                "id": e.id,
                "task_id": e.task_id,
                "event_type": e.event_type,
                "ts": e.ts.isoformat(),
                "payload": e.payload,
            }
            for e in folded.events
        ]
        await conn.execute(
            _INSERT_EVENTS,
            {"project": project_id, "agent": agent_id, "rows": Jsonb(rows, fastjson.dumps)},
        )
    if folded.count_retries:
        await conn.execute(_COUNT_RETRIES, {"ids": sorted(folded.count_retries)})
