"""Appending the audit row every action writes (04-API-SPEC §10), in the action's transaction."""

from __future__ import annotations

import uuid
from typing import Any

from platformkit.db.scope import Conn

from agentbus.actions.context import Ctx
from agentbus.store.audit_actions import insert_audit_action


async def record_action(
    conn: Conn,
    ctx: Ctx,
    tenant_id: uuid.UUID,
    action: str,
    *,
    target_type: str | None = None,
    target_id: str | None = None,
    details: dict[str, Any] | None = None,
) -> uuid.UUID:
    return await insert_audit_action(
        conn,
        tenant_id,
        actor_type=ctx.actor.type,
        actor_id=ctx.actor.id,
        action=action,
        target_type=target_type,
        target_id=target_id,
        details=details,
        ip=ctx.ip,
        user_agent=ctx.user_agent,
    )
