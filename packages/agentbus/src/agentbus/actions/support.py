"""Support access with consent (data model §1.9, §1.10): a tenant owner opens a time-boxed
window (``support_consents``) in which the support role may read the tenant's rows, and may
close it early. Both are audited; the support reads themselves are audited by
``agentbus.support_console`` and show in the tenant's audit log with the window's id as
``consent_ref``."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from agentbus.actions.access import require_tenant_admin, require_tenant_owner, tenant_scope
from agentbus.actions.audit import record_action
from agentbus.actions.context import Ctx
from agentbus.errors import NotFound, RequestInvalid, RoleRequired
from agentbus.ids import format_id
from agentbus.store import support_consents

MAX_WINDOW = timedelta(days=7)


async def grant_consent(
    ctx: Ctx, tenant_id: uuid.UUID, *, hours: float, ticket_ref: str | None = None
) -> dict[str, Any]:
    """Open a window of ``hours`` from now (at most 7 days); tenant owner only. Its scope is
    metadata: support reads no payloads (``"payloads": false``)."""
    if not 0 < hours <= MAX_WINDOW.total_seconds() / 3600:
        raise RequestInvalid("a consent window lasts more than 0 and at most 168 hours",
                             field="hours")  # fmt: skip
    if ctx.actor.user_id is None:
        raise RoleRequired("a consent is granted by the tenant's owner")
    now = datetime.now(UTC)
    async with tenant_scope(ctx, tenant_id) as (conn, _tenant):
        await require_tenant_owner(conn, ctx, tenant_id)
        row = await support_consents.insert_consent(
            conn, tenant_id, granted_by=ctx.actor.user_id, scope={"payloads": False},
            starts_at=now, ends_at=now + timedelta(hours=hours), ticket_ref=ticket_ref,
        )  # fmt: skip
        await record_action(
            conn, ctx, tenant_id, "support.consent.grant", target_type="support_consent",
            target_id=str(row["id"]),
            details={"ends_at": row["ends_at"].isoformat(), "ticket_ref": ticket_ref},
        )  # fmt: skip
    return row


async def list_consents(ctx: Ctx, tenant_id: uuid.UUID) -> list[dict[str, Any]]:
    async with tenant_scope(ctx, tenant_id) as (conn, _tenant):
        await require_tenant_admin(conn, ctx, tenant_id)
        return await support_consents.list_consents(conn, tenant_id)


async def revoke_consent(ctx: Ctx, tenant_id: uuid.UUID, consent_id: uuid.UUID) -> dict[str, Any]:
    """Close a window now (tenant owner); support reads stop at once."""
    async with tenant_scope(ctx, tenant_id) as (conn, _tenant):
        await require_tenant_owner(conn, ctx, tenant_id)
        row = await support_consents.revoke_consent(conn, tenant_id, consent_id)
        if row is None:
            raise NotFound(f"no support consent {consent_id}")
        await record_action(
            conn, ctx, tenant_id, "support.consent.revoke", target_type="support_consent",
            target_id=str(consent_id), details={"tenant": format_id("ten", tenant_id)},
        )  # fmt: skip
    return row
