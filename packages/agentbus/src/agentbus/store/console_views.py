"""Read-only views the console shows, each in the tenant's scope (the caller's transaction):
agents with presence and keys, recent conversations, tasks by state, dead letters, and live
counts. Writes go through the actions the API uses (redrive)."""

from __future__ import annotations

import uuid
from typing import Any

from platformkit.db.scope import Conn

Row = dict[str, Any]
LIMIT = 200


async def agents_with_keys(conn: Conn, tenant_id: uuid.UUID) -> list[Row]:
    cur = await conn.execute(
        """SELECT a.id, a.name, a.address, a.harness::text AS harness, a.status::text AS status,
                  a.last_seen_at, a.last_host, w.slug AS workspace,
                  COALESCE((SELECT json_agg(json_build_object(
                        'fingerprint', k.fingerprint, 'expires_at', k.expires_at,
                        'revoked', k.revoked_at IS NOT NULL) ORDER BY k.created_at)
                      FROM agent_keys k WHERE k.tenant_id = a.tenant_id AND k.agent_id = a.id),
                    '[]'::json) AS keys
             FROM agents a JOIN workspaces w ON w.id = a.workspace_id
            WHERE a.tenant_id = %s AND a.deleted_at IS NULL
            ORDER BY w.slug, a.name LIMIT %s""",
        (tenant_id, LIMIT),
    )
    return list(await cur.fetchall())


async def agent_names(conn: Conn, tenant_id: uuid.UUID) -> dict[uuid.UUID, str]:
    cur = await conn.execute("SELECT id, name FROM agents WHERE tenant_id = %s", (tenant_id,))
    return {r["id"]: r["name"] for r in await cur.fetchall()}


async def conversations(conn: Conn, tenant_id: uuid.UUID) -> list[Row]:
    cur = await conn.execute(
        """SELECT c.id, c.title, c.message_count, c.last_message_at, c.created_at,
                  c.participants, s.name AS started_by
             FROM conversations c JOIN agents s ON s.id = c.started_by
            WHERE c.tenant_id = %s
            ORDER BY c.last_message_at DESC NULLS LAST LIMIT %s""",
        (tenant_id, LIMIT),
    )
    return list(await cur.fetchall())


async def conversation_messages(conn: Conn, tenant_id: uuid.UUID, cnv: uuid.UUID) -> list[Row]:
    cur = await conn.execute(
        """SELECT m.id, m.type, m.status::text AS status, m.accepted_at, m.delivered_at,
                  m.read_at, f.name AS sender, t.name AS recipient, m.payload_bytes
             FROM messages m JOIN agents f ON f.id = m.from_agent_id
             LEFT JOIN agents t ON t.id = m.to_agent_id
            WHERE m.tenant_id = %s AND m.conversation_id = %s
            ORDER BY m.accepted_at LIMIT %s""",
        (tenant_id, cnv, LIMIT),
    )
    return list(await cur.fetchall())


async def tasks_by_state(conn: Conn, tenant_id: uuid.UUID) -> list[Row]:
    cur = await conn.execute(
        """SELECT k.id, k.state::text AS state, k.capability, k.spent, k.budget, k.submitted_at,
                  k.error_code, r.name AS requester, p.name AS recipient
             FROM tasks k JOIN agents r ON r.id = k.requester_agent_id
             JOIN agents p ON p.id = k.recipient_agent_id
            WHERE k.tenant_id = %s ORDER BY k.submitted_at DESC LIMIT %s""",
        (tenant_id, LIMIT),
    )
    return list(await cur.fetchall())


async def dead_letters(conn: Conn, tenant_id: uuid.UUID) -> list[Row]:
    cur = await conn.execute(
        """SELECT m.id, m.type, m.accepted_at, m.attempts, f.name AS sender,
                  t.name AS recipient, d.dlq_reason
             FROM messages m JOIN agents f ON f.id = m.from_agent_id
             LEFT JOIN agents t ON t.id = m.to_agent_id
             LEFT JOIN delivery_state d ON d.msg_id = m.id AND d.agent_id = m.to_agent_id
            WHERE m.tenant_id = %s AND m.status = 'dead_lettered'
            ORDER BY m.accepted_at DESC LIMIT %s""",
        (tenant_id, LIMIT),
    )
    return list(await cur.fetchall())


async def live_counts(conn: Conn, tenant_id: uuid.UUID) -> dict[str, int]:
    """What the pages' live figures show: agents online, messages waiting, dead letters and
    open tasks."""
    cur = await conn.execute(
        """SELECT
             (SELECT count(*) FROM agents WHERE tenant_id = %(t)s AND status IN ('online', 'idle')
                 AND deleted_at IS NULL) AS agents_online,
             (SELECT count(*) FROM messages WHERE tenant_id = %(t)s
                 AND status IN ('accepted', 'fetched')) AS messages_waiting,
             (SELECT count(*) FROM messages WHERE tenant_id = %(t)s
                 AND status = 'dead_lettered') AS dead_letters,
             (SELECT count(*) FROM tasks WHERE tenant_id = %(t)s
                 AND state IN ('submitted', 'delivered', 'accepted', 'in_progress'))
                 AS open_tasks""",
        {"t": tenant_id},
    )
    row = await cur.fetchone()
    return {k: int(v) for k, v in (row or {}).items()}
