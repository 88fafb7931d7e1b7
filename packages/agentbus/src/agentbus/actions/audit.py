"""Appending the audit row every action writes (04-API-SPEC §10), in the action's transaction,
and reading a tenant's rows back (tenant owners and admins, the platform operator)."""

from __future__ import annotations

import uuid
from typing import Any

from platformkit.db.scope import Conn

from agentbus.actions.access import require_tenant_admin, tenant_scope
from agentbus.actions.context import Ctx
from agentbus.store.audit_actions import insert_audit_action, list_audit_actions


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


async def list_actions(
    ctx: Ctx,
    tenant_id: uuid.UUID,
    *,
    action: str | None = None,
    target_id: str | None = None,
    limit: int = 100,
) -> list[dict[str, Any]]:
    """The tenant's audit rows, newest first."""
    async with tenant_scope(ctx, tenant_id) as (conn, _tenant):
        await require_tenant_admin(conn, ctx, tenant_id)
        return await list_audit_actions(
            conn, tenant_id, limit=limit, action=action, target_id=target_id
        )
