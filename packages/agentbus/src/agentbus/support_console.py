"""What support staff read, logged in as ``agentbus_support`` (data model §1.10): row-level
security shows that role a tenant's rows only while one of the tenant's consent windows is
open, and refuses its audit row otherwise.

Every read runs in the tenant's scope, checks for an open window first (AB-4005 without one,
so staff are told why they see nothing), and writes an ``audit_actions`` row ``support.read``
with the window as ``consent_ref`` in the same transaction: the tenant sees each read in its
audit log and its audit chain. Payloads are not readable here: the support role has no access
to ``tenant_keys``.
"""

from __future__ import annotations

import uuid
from typing import Any

from platformkit.db.scope import Pool, tenant_transaction

from agentbus.db import SCOPE
from agentbus.errors import RequestInvalid, SupportConsentRequired
from agentbus.ids import format_id
from agentbus.store.audit_actions import insert_audit_action
from agentbus.store.support_consents import open_consent

# What a support engineer may list: metadata only, newest first.
VIEWS = {
    "agents": "SELECT id, workspace_id, name, address, status, last_seen_at, created_at"
    " FROM agents WHERE tenant_id = %s ORDER BY created_at DESC LIMIT %s",
    "messages": "SELECT id, workspace_id, from_agent_id, to_agent_id, type, status,"
    " payload_bytes, accepted_at FROM messages WHERE tenant_id = %s"
    " ORDER BY accepted_at DESC LIMIT %s",
    "tasks": "SELECT id, workspace_id, capability, state, requester_agent_id,"
    " recipient_agent_id, submitted_at FROM tasks WHERE tenant_id = %s"
    " ORDER BY submitted_at DESC LIMIT %s",
    "audit_actions": "SELECT id, actor_type, actor_id, action, target_type, target_id, at"
    " FROM audit_actions WHERE tenant_id = %s ORDER BY at DESC LIMIT %s",
}
LIMIT_MAX = 500


async def support_read(
    pool: Pool, tenant_id: uuid.UUID, staff: str, what: str, *, limit: int = 50,
    ip: str | None = None,
) -> list[dict[str, Any]]:  # fmt: skip
    """``what`` (one of ``VIEWS``) of the tenant, as ``staff``, inside an open window."""
    if what not in VIEWS:
        raise RequestInvalid(f"support reads one of {', '.join(sorted(VIEWS))}", field="what")
    if not staff or len(staff) > 200:
        raise RequestInvalid("name the staff member reading (1 to 200 characters)", field="staff")
    limit = max(1, min(limit, LIMIT_MAX))
    async with tenant_transaction(pool, SCOPE, tenant_id) as conn:
        consent = await open_consent(conn, tenant_id)
        if consent is None:
            raise SupportConsentRequired(
                f"tenant {format_id('ten', tenant_id)} has no open support consent window"
            )
        rows = list(await (await conn.execute(VIEWS[what], (tenant_id, limit))).fetchall())
        await insert_audit_action(
            conn, tenant_id, actor_type="support", actor_id=staff, action="support.read",
            target_type=what, target_id=format_id("ten", tenant_id), consent_ref=consent["id"],
            details={"rows": len(rows), "limit": limit}, ip=ip,
        )  # fmt: skip
    return rows
