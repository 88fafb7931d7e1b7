"""The ``schedules`` table: a project's schedules and the claims its beat processes make.

Every function runs inside a project-scoped transaction (row-level security) and also names the
project in its SQL. ``metadata`` holds ``timezone``, ``queue``, ``last_task_id``,
``total_run_count``, ``skip_if_running``, ``skipped_count`` and ``source``
(docs/z4j/schedules.md).
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from platformkit.db.scope import Conn
from platformkit.ids import uuid7
from psycopg.types.json import Jsonb

_COLUMNS = (
    "s.id, s.project_id, s.agent_id, s.scheduler, s.name, s.task, "
    "s.schedule_type::text AS schedule_type, s.expression, s.args, s.kwargs, s.enabled, "
    "s.last_run_at, s.next_run_at, s.metadata, s.created_at, s.updated_at"
)
# Columns an edit may set (the schedule's definition and its computed next run).
EDITABLE = ("name", "task", "schedule_type", "expression", "args", "kwargs", "enabled",
            "next_run_at", "metadata", "agent_id")  # fmt: skip


async def create(conn: Conn, project_id: uuid.UUID, values: dict[str, Any]) -> dict[str, Any]:
    cur = await conn.execute(
        "INSERT INTO schedules AS s (id, project_id, agent_id, scheduler, name, task, "
        "schedule_type, expression, args, kwargs, enabled, next_run_at, metadata) "
        "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s) "
        f"ON CONFLICT (project_id, name) DO NOTHING RETURNING {_COLUMNS}",
        (
            uuid7(), project_id, values.get("agent_id"), values["scheduler"], values["name"],
            values["task"], values["schedule_type"], values["expression"],
            Jsonb(values["args"]), Jsonb(values["kwargs"]), values["enabled"],
            values["next_run_at"], Jsonb(values["metadata"]),
        ),
    )  # fmt: skip
    row = await cur.fetchone()
    if row is None:
        raise LookupError("name taken")
    return row


async def list_for_project(conn: Conn, project_id: uuid.UUID) -> list[dict[str, Any]]:
    cur = await conn.execute(
        f"SELECT {_COLUMNS} FROM schedules s WHERE s.project_id = %s ORDER BY s.name",
        (project_id,),
    )
    return await cur.fetchall()


async def task_states(
    conn: Conn, project_id: uuid.UUID, task_ids: list[uuid.UUID]
) -> dict[uuid.UUID, str]:
    """The state of each of these tasks the brain has seen (runs that schedules fired)."""
    cur = await conn.execute(
        "SELECT id, state::text AS state FROM tasks WHERE project_id = %s AND id = ANY(%s)",
        (project_id, task_ids),
    )
    return {row["id"]: row["state"] for row in await cur.fetchall()}


async def get(
    conn: Conn, project_id: uuid.UUID, schedule_id: uuid.UUID, *, lock: bool = False
) -> dict[str, Any] | None:
    cur = await conn.execute(
        f"SELECT {_COLUMNS} FROM schedules s WHERE s.project_id = %s AND s.id = %s"
        + (" FOR UPDATE" if lock else ""),
        (project_id, schedule_id),
    )
    return await cur.fetchone()


async def update(
    conn: Conn, project_id: uuid.UUID, schedule_id: uuid.UUID, values: dict[str, Any]
) -> dict[str, Any] | None:
    """Set the given ``EDITABLE`` columns; None when the new name is another schedule's."""
    columns = [key for key in EDITABLE if key in values]
    params = [
        Jsonb(values[key]) if key in ("args", "kwargs", "metadata") else values[key]
        for key in columns
    ]
    assignments = ", ".join(f"{key} = %s" for key in columns)
    cur = await conn.execute(
        f"UPDATE schedules AS s SET {assignments}, updated_at = now() "
        "WHERE s.project_id = %s AND s.id = %s AND NOT EXISTS (SELECT 1 FROM schedules o "
        "  WHERE o.project_id = s.project_id AND o.name = %s AND o.id <> s.id) "
        f"RETURNING {_COLUMNS}",
        (*params, project_id, schedule_id, values.get("name", "")),
    )
    return await cur.fetchone()


async def delete(conn: Conn, project_id: uuid.UUID, schedule_id: uuid.UUID) -> bool:
    cur = await conn.execute(
        "DELETE FROM schedules WHERE project_id = %s AND id = %s", (project_id, schedule_id)
    )
    return cur.rowcount == 1


async def for_agent(conn: Conn, project_id: uuid.UUID, agent_id: uuid.UUID) -> list[dict[str, Any]]:
    """What a beat process of ``agent_id`` applies: the project's enabled schedules meant for
    any agent or for this one."""
    cur = await conn.execute(
        f"SELECT {_COLUMNS} FROM schedules s WHERE s.project_id = %s AND s.enabled "
        "AND (s.agent_id IS NULL OR s.agent_id = %s) ORDER BY s.id",
        (project_id, agent_id),
    )
    return await cur.fetchall()


async def record_run(
    conn: Conn,
    project_id: uuid.UUID,
    schedule_id: uuid.UUID,
    last_run_at: datetime,
    next_run_at: datetime | None,
    task_id: str,
) -> None:
    """A won claim: the run's time, the next slot, and the task id the beat sends."""
    await conn.execute(
        "UPDATE schedules SET last_run_at = %s, next_run_at = %s, updated_at = now(), "
        "metadata = metadata || jsonb_build_object('last_task_id', %s::text, 'total_run_count', "
        "  coalesce((metadata ->> 'total_run_count')::bigint, 0) + 1) "
        "WHERE project_id = %s AND id = %s",
        (last_run_at, next_run_at, task_id, project_id, schedule_id),
    )


async def record_skip(
    conn: Conn, project_id: uuid.UUID, schedule_id: uuid.UUID, next_run_at: datetime | None
) -> None:
    """A due slot spent without a run (its previous run had not finished)."""
    await conn.execute(
        "UPDATE schedules SET next_run_at = %s, updated_at = now(), "
        "metadata = metadata || jsonb_build_object('skipped_count', "
        "  coalesce((metadata ->> 'skipped_count')::bigint, 0) + 1) "
        "WHERE project_id = %s AND id = %s",
        (next_run_at, project_id, schedule_id),
    )
