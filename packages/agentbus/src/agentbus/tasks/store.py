"""tasks and task_transitions: SQL only. Every function takes the tenant and runs on a connection
already inside that tenant's scope (RLS), so a wrong tenant simply finds no rows.

``task_transitions`` is append-only (the app role has no UPDATE on it).
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from platformkit.db.scope import Conn
from platformkit.ids import uuid7
from psycopg import sql

Row = dict[str, Any]

COLUMNS = (
    "id, tenant_id, workspace_id, conversation_id, request_msg_id, requester_agent_id,"
    " recipient_agent_id, idempotency_key, capability, capability_ver, state, budget, spent,"
    " grant_id, result_msg_id, error_code, progress, submitted_at, delivered_at, accepted_at,"
    " started_at, finished_at, expires_at, duration_ms"
)
OPEN_STATES = ["submitted", "delivered", "accepted", "in_progress"]
UPDATABLE = frozenset(
    {"state", "delivered_at", "accepted_at", "started_at", "finished_at", "error_code",
     "result_msg_id", "progress", "spent"}
)  # fmt: skip


async def insert_task(conn: Conn, tenant_id: uuid.UUID, **values: Any) -> Row | None:
    """Insert a ``submitted`` task; None when the id or (recipient, idempotency key) exists."""
    cols = ["tenant_id", *values]
    cur = await conn.execute(
        sql.SQL("INSERT INTO tasks ({}) VALUES ({}) ON CONFLICT DO NOTHING RETURNING {}").format(
            sql.SQL(", ").join(map(sql.Identifier, cols)),
            sql.SQL(", ").join(sql.Placeholder() * len(cols)),
            sql.SQL(COLUMNS),
        ),
        [tenant_id, *values.values()],
    )
    return await cur.fetchone()


async def get_task(
    conn: Conn, tenant_id: uuid.UUID, task_id: uuid.UUID, *, lock: bool = False
) -> Row | None:
    cur = await conn.execute(
        f"SELECT {COLUMNS} FROM tasks WHERE tenant_id = %s AND id = %s"
        + (" FOR UPDATE" if lock else ""),
        (tenant_id, task_id),
    )
    return await cur.fetchone()


async def get_by_key(
    conn: Conn, tenant_id: uuid.UUID, recipient: uuid.UUID, idempotency_key: str
) -> Row | None:
    """The task holding (recipient, key), with its request's ``payload_sha256``."""
    cur = await conn.execute(
        f"""SELECT {", ".join("t." + c.strip() for c in COLUMNS.split(","))},
                   m.payload_sha256 AS request_sha256
              FROM tasks t
              LEFT JOIN messages m ON m.tenant_id = t.tenant_id AND m.id = t.request_msg_id
                   AND m.accepted_at >= t.submitted_at - interval '10 minutes'
             WHERE t.tenant_id = %s AND t.recipient_agent_id = %s AND t.idempotency_key = %s""",
        (tenant_id, recipient, idempotency_key),
    )
    return await cur.fetchone()


async def update_task(
    conn: Conn, tenant_id: uuid.UUID, task_id: uuid.UUID, expected_state: str, **values: Any
) -> Row | None:
    """Set ``values`` if the task is still in ``expected_state``; None if it moved meanwhile."""
    unknown = set(values) - UPDATABLE
    if unknown:
        raise ValueError(f"not updatable: {sorted(unknown)}")
    assignments = sql.SQL(", ").join(
        sql.SQL("{} = {}").format(sql.Identifier(k), sql.Placeholder()) for k in values
    )
    cur = await conn.execute(
        sql.SQL(
            "UPDATE tasks SET {} WHERE tenant_id = %s AND id = %s AND state = %s RETURNING {}"
        ).format(assignments, sql.SQL(COLUMNS)),
        [*values.values(), tenant_id, task_id, expected_state],
    )
    return await cur.fetchone()


async def insert_transition(
    conn: Conn,
    tenant_id: uuid.UUID,
    task_id: uuid.UUID,
    from_state: str | None,
    to_state: str,
    *,
    by_msg_id: uuid.UUID | None,
    reason: str | None = None,
    at: datetime | None = None,
) -> None:
    await conn.execute(
        """INSERT INTO task_transitions (id, tenant_id, task_id, from_state, to_state, by_msg_id,
                                         reason, at)
           VALUES (%s, %s, %s, %s, %s, %s, %s, COALESCE(%s, now()))""",
        (uuid7(), tenant_id, task_id, from_state, to_state, by_msg_id, reason, at),
    )


async def list_transitions(conn: Conn, tenant_id: uuid.UUID, task_id: uuid.UUID) -> list[Row]:
    cur = await conn.execute(
        """SELECT id, from_state, to_state, by_msg_id, reason, at FROM task_transitions
            WHERE tenant_id = %s AND task_id = %s ORDER BY at, id""",
        (tenant_id, task_id),
    )
    return await cur.fetchall()


async def list_tasks(
    conn: Conn,
    tenant_id: uuid.UUID,
    agent_id: uuid.UUID,
    *,
    role: str | None,
    state: str | None,
    capability: str | None,
    before: uuid.UUID | None,
    limit: int,
) -> list[Row]:
    """The agent's tasks (as ``role``, or either), newest first by id."""
    party = {
        "requester": "requester_agent_id = %(a)s",
        "recipient": "recipient_agent_id = %(a)s",
        None: "(requester_agent_id = %(a)s OR recipient_agent_id = %(a)s)",
    }[role]
    cur = await conn.execute(
        f"""SELECT {COLUMNS} FROM tasks
             WHERE tenant_id = %(t)s AND {party}
               AND (%(s)s::task_state_t IS NULL OR state = %(s)s::task_state_t)
               AND (%(c)s::text IS NULL OR capability = %(c)s)
               AND (%(b)s::uuid IS NULL OR id < %(b)s)
             ORDER BY id DESC LIMIT %(n)s""",
        {"t": tenant_id, "a": agent_id, "s": state, "c": capability, "b": before, "n": limit},
    )
    return await cur.fetchall()


async def due_expiries(conn: Conn, tenant_id: uuid.UUID, limit: int) -> list[uuid.UUID]:
    """Open tasks whose deadline (``expires_at``) has passed."""
    cur = await conn.execute(
        """SELECT id FROM tasks WHERE tenant_id = %s AND state = ANY(%s::task_state_t[])
              AND expires_at < now() ORDER BY expires_at LIMIT %s""",
        (tenant_id, OPEN_STATES, limit),
    )
    return [row["id"] for row in await cur.fetchall()]


async def addresses(conn: Conn, tenant_id: uuid.UUID, agent_ids: list[uuid.UUID]) -> dict[Any, str]:
    """``agents.address`` by agent id, for rendering tasks."""
    cur = await conn.execute(
        "SELECT id, address FROM agents WHERE tenant_id = %s AND id = ANY(%s)",
        (tenant_id, list(set(agent_ids))),
    )
    return {row["id"]: row["address"] for row in await cur.fetchall()}
