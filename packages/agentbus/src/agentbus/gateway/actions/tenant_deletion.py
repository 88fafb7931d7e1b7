"""``DELETE /v1/tenants/{ten}``: crypto-shredding (data model §5.5, steps 1 to 3).

In one transaction, by the tenant's owner and with ``AgentBus-Confirm: <ten_ id>`` (AB-8010
without it): the tenant becomes ``deleting``, every integration token is revoked, every agent is
disabled, and every ``tenant_keys`` row is destroyed, its wrapped key overwritten with zeros.
From the commit on no payload or blob of the tenant can be opened again, whatever is left in the
object store; the gateway forgets the tenant's keys, and the tenant's JetStream stream (copies
that name payloads nobody can open any more) is deleted. Step 4 is the retention job's next run
(``controllers.retention``): every message and blob goes with its objects, and the tenant
becomes ``deleted``; its other rows, and ``audit_actions`` with the deletion, stay.
"""

from __future__ import annotations

import uuid
from typing import Any

from agentbus.actions.access import require_tenant_owner, tenant_scope
from agentbus.actions.audit import record_action
from agentbus.actions.context import Ctx
from agentbus.errors import ConfirmationRequired, StateConflict
from agentbus.gateway.context import Gateway
from agentbus.gateway.store import agents
from agentbus.ids import format_id
from agentbus.store import integration_tokens, tenant_keys, tenants

Row = dict[str, Any]
CONFIRM_HEADER = "AgentBus-Confirm"
REVOKED_REASON = "tenant deleted"


async def delete_tenant(ctx: Ctx, gw: Gateway, tenant_id: uuid.UUID, confirm: str | None) -> Row:
    """The tenant row, now ``deleting``; AB-8010 unless ``confirm`` names the tenant, AB-1008
    for anyone but its owner, AB-8008 for a tenant already being deleted."""
    name = format_id("ten", tenant_id)
    if confirm != name:
        raise ConfirmationRequired(f"send {CONFIRM_HEADER}: {name} to delete the tenant")
    async with tenant_scope(ctx, tenant_id) as (conn, tenant):
        await require_tenant_owner(conn, ctx, tenant_id)
        row = await tenants.set_tenant_status(
            conn, tenant_id, "deleting", only_from=["active", "suspended"]
        )
        if row is None:
            raise StateConflict(f"tenant is {tenant['status']}", tenant_status=tenant["status"])
        counts = {
            "tokens_revoked": await integration_tokens.revoke_all(conn, tenant_id, REVOKED_REASON),
            "agents_disabled": await agents.disable_all(conn, tenant_id),
            "keys_destroyed": await tenant_keys.destroy_keys(conn, tenant_id),
        }
        await record_action(
            conn, ctx, tenant_id, "tenant.delete", target_type="tenant", target_id=name,
            details={"slug": tenant["slug"], **counts},
        )  # fmt: skip
    gw.data_keys.forget(tenant_id)
    await gw.broker.delete_stream(tenant_id)
    return row
