"""audit_actions: append-only record of elevated actions (data model §1.9). The gateway role
may insert but never update or delete. A tenant's row is linked into the tenant's audit chain
(``store.audit_chain``) in the same transaction."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from platformkit.db.scope import Conn
from platformkit.ids import uuid7
from psycopg.types.json import Jsonb

from agentbus.store import audit_chain

_COLUMNS = """id, tenant_id, actor_type, actor_id, action, target_type, target_id, consent_ref,
              details, host(ip) AS ip, user_agent, at"""


async def insert_audit_action(
    conn: Conn,
    tenant_id: uuid.UUID | None,
    *,
    actor_type: str,
    actor_id: str,
    action: str,
    target_type: str | None = None,
    target_id: str | None = None,
    details: dict[str, Any] | None = None,
    consent_ref: uuid.UUID | None = None,
    ip: str | None = None,
    user_agent: str | None = None,
) -> uuid.UUID:
    action_id = uuid7()
    cur = await conn.execute(
        f"""INSERT INTO audit_actions (id, tenant_id, actor_type, actor_id, action, target_type,
               target_id, consent_ref, details, ip, user_agent)
           VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s) RETURNING {_COLUMNS}""",
        (
            action_id,
            tenant_id,
            actor_type,
            actor_id,
            action,
            target_type,
            target_id,
            consent_ref,
            Jsonb(details or {}),
            ip,
            user_agent,
        ),
    )
    row = await cur.fetchone()
    assert row is not None
    if tenant_id is not None:
        await audit_chain.append_action(conn, row)
    return action_id


async def actions_by_id(
    conn: Conn, tenant_id: uuid.UUID, ids: list[uuid.UUID]
) -> dict[uuid.UUID, dict[str, Any]]:
    cur = await conn.execute(
        f"SELECT {_COLUMNS} FROM audit_actions WHERE tenant_id = %s AND id = ANY(%s)",
        (tenant_id, ids),
    )
    return {row["id"]: row for row in await cur.fetchall()}


async def list_audit_actions(
    conn: Conn,
    tenant_id: uuid.UUID,
    *,
    limit: int = 100,
    before: tuple[datetime, uuid.UUID] | None = None,
    action: str | None = None,
    target_id: str | None = None,
) -> list[dict[str, Any]]:
    """Newest first (``at``, then id), after the position ``before`` of a previous page; the
    tenant's ``(tenant_id, at DESC)`` index serves the order, the filters narrow it."""
    where, params = ["tenant_id = %(t)s"], {"t": tenant_id, "limit": limit}
    if before is not None:
        where.append("(at, id) < (%(at)s, %(id)s)")
        params |= {"at": before[0], "id": before[1]}
    if action is not None:
        where.append("action = %(action)s")
        params["action"] = action
    if target_id is not None:
        where.append("target_id = %(target)s")
        params["target"] = target_id
    cur = await conn.execute(
        f"""SELECT {_COLUMNS}
              FROM audit_actions WHERE {" AND ".join(where)}
             ORDER BY at DESC, id DESC LIMIT %(limit)s""",
        params,
    )
    return await cur.fetchall()
