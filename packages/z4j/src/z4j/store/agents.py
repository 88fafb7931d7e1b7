"""Agents: one row per configured agent of a project, found by the HMAC of its token."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from platformkit.db.scope import Conn
from platformkit.ids import uuid7
from psycopg.types.json import Jsonb

_COLUMNS = """id, project_id, name, protocol_version, framework_adapter, engine_adapters,
    scheduler_adapters, capabilities, state, last_seen_at, last_connect_at, metadata, created_at"""


async def create(conn: Conn, project_id: uuid.UUID, name: str, token_hash: str) -> dict[str, Any]:
    cur = await conn.execute(
        f"INSERT INTO agents (id, project_id, name, token_hash) VALUES (%s, %s, %s, %s) "
        f"RETURNING {_COLUMNS}",
        (uuid7(), project_id, name, token_hash),
    )
    row = await cur.fetchone()
    assert row is not None
    return row


async def find_by_token_hash(conn: Conn, token_hash: str) -> dict[str, Any] | None:
    """Platform scope: the token names the project before anything else is known."""
    cur = await conn.execute(f"SELECT {_COLUMNS} FROM agents WHERE token_hash = %s", (token_hash,))
    return await cur.fetchone()


async def get(conn: Conn, project_id: uuid.UUID, agent_id: uuid.UUID) -> dict[str, Any] | None:
    cur = await conn.execute(
        f"SELECT {_COLUMNS} FROM agents WHERE project_id = %s AND id = %s", (project_id, agent_id)
    )
    return await cur.fetchone()


async def list_for_project(conn: Conn, project_id: uuid.UUID) -> list[dict[str, Any]]:
    cur = await conn.execute(
        f"SELECT {_COLUMNS} FROM agents WHERE project_id = %s ORDER BY name", (project_id,)
    )
    return await cur.fetchall()


async def record_hello(
    conn: Conn, agent_id: uuid.UUID, hello: dict[str, Any], at: datetime
) -> None:
    capabilities = hello.get("capabilities")
    host = hello.get("host")
    meta = {
        k: hello.get(k)
        for k in ("agent_version", "worker_id", "worker_role", "worker_pid", "worker_started_at")
    }
    meta["host"] = host if isinstance(host, dict) else {}
    await conn.execute(
        """UPDATE agents SET protocol_version = %s, framework_adapter = %s, engine_adapters = %s,
               scheduler_adapters = %s, capabilities = %s, metadata = %s, state = 'online',
               last_connect_at = %s, last_seen_at = %s, updated_at = now()
           WHERE id = %s""",
        (
            str(hello.get("protocol_version", ""))[:20],
            str(hello.get("framework", ""))[:40],
            [str(e)[:40] for e in hello.get("engines") or []][:64],
            [str(s)[:40] for s in hello.get("schedulers") or []][:64],
            Jsonb(capabilities if isinstance(capabilities, dict) else {}),
            Jsonb(meta),
            at,
            at,
            agent_id,
        ),
    )


async def touch(conn: Conn, agent_id: uuid.UUID, at: datetime) -> None:
    await conn.execute(
        "UPDATE agents SET last_seen_at = GREATEST(last_seen_at, %s), state = 'online', "
        "updated_at = now() WHERE id = %s AND (state <> 'online' OR last_seen_at IS NULL "
        "OR last_seen_at < %s - interval '1 second')",
        (at, agent_id, at),
    )


async def mark_offline(conn: Conn, agent_id: uuid.UUID) -> None:
    await conn.execute(
        "UPDATE agents SET state = 'offline', updated_at = now() WHERE id = %s", (agent_id,)
    )


async def mark_stale_offline(conn: Conn, silent_for_seconds: int) -> int:
    """Platform scope: agents not heard from for a while are offline. Returns how many."""
    cur = await conn.execute(
        "UPDATE agents SET state = 'offline', updated_at = now() WHERE state = 'online' "
        "AND last_seen_at < now() - make_interval(secs => %s)",
        (silent_for_seconds,),
    )
    return cur.rowcount


async def start_reports(
    conn: Conn, project_id: uuid.UUID, waited_seconds: float
) -> dict[uuid.UUID, tuple[int, int]]:
    """Per online worker agent (not a producer), over its tasks of the last hour since it
    connected: how many still wait after ``waited_seconds``, and how many moved past pending."""
    cur = await conn.execute(
        """SELECT a.id,
               count(*) FILTER (WHERE t.state = 'pending'
                   AND t.enqueued_at < now() - make_interval(secs => %s)) AS waiting,
               count(*) FILTER (WHERE t.state <> 'pending') AS progressed
           FROM agents a JOIN tasks t ON t.project_id = a.project_id AND t.agent_id = a.id
               AND t.created_at >= GREATEST(a.last_connect_at, now() - interval '1 hour')
           WHERE a.project_id = %s AND a.state = 'online'
               AND a.metadata ->> 'worker_role' IS DISTINCT FROM 'producer'
           GROUP BY a.id""",
        (waited_seconds, project_id),
    )
    return {row["id"]: (row["waiting"], row["progressed"]) for row in await cur.fetchall()}


async def delete(conn: Conn, project_id: uuid.UUID, agent_id: uuid.UUID) -> bool:
    """Tasks and events keep their rows; the foreign keys set their agent_id to NULL."""
    cur = await conn.execute(
        "DELETE FROM agents WHERE project_id = %s AND id = %s", (project_id, agent_id)
    )
    return cur.rowcount > 0


async def add_capability(conn: Conn, agent_id: uuid.UUID, engine: str, action: str) -> None:
    """Add ``action`` to the agent's capabilities for ``engine``, keeping what it advertised."""
    await conn.execute(
        """UPDATE agents SET capabilities = jsonb_set(capabilities, ARRAY[%s],
               COALESCE(capabilities -> %s, '[]'::jsonb) || to_jsonb(%s::text))
           WHERE id = %s AND NOT COALESCE(capabilities -> %s, '[]'::jsonb) ? %s""",
        (engine, engine, action, agent_id, engine, action),
    )
