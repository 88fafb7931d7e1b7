"""audit_actions: append-only record of elevated actions (data model §1.9). The gateway role
may insert but never update or delete."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from platformkit.db.scope import Conn
from platformkit.ids import uuid7
from psycopg.types.json import Jsonb


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
    await conn.execute(
        """INSERT INTO audit_actions (id, tenant_id, actor_type, actor_id, action, target_type,
               target_id, consent_ref, details, ip, user_agent)
           VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)""",
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
    return action_id


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
        f"""SELECT id, tenant_id, actor_type, actor_id, action, target_type, target_id,
                   consent_ref, details, host(ip) AS ip, user_agent, at
              FROM audit_actions WHERE {" AND ".join(where)}
             ORDER BY at DESC, id DESC LIMIT %(limit)s""",
        params,
    )
    return await cur.fetchall()
