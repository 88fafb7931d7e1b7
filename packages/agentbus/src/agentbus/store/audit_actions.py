"""audit_actions: append-only record of elevated actions (data model §1.9). The gateway role
may insert but never update or delete."""

from __future__ import annotations

import uuid
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
    conn: Conn, tenant_id: uuid.UUID, *, limit: int = 100
) -> list[dict[str, Any]]:
    cur = await conn.execute(
        """SELECT id, tenant_id, actor_type, actor_id, action, target_type, target_id,
                  consent_ref, details, ip::text AS ip, user_agent, at
             FROM audit_actions WHERE tenant_id = %s ORDER BY at DESC, id DESC LIMIT %s""",
        (tenant_id, limit),
    )
    return await cur.fetchall()
