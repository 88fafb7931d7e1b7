"""A tenant's admins as the platform sees them: the first admin of a new tenant, and a
platform admin restoring one (a tenant whose admins were all disabled or removed outside the
last-admin rule: an account disabled by a platform admin, an OIDC or billing change).

Both write the tenant chain (``member.add``/``member.enable``, ``role_binding.create``) and,
for a restore, the platform chain (``tenant.admin_restore``).
"""

from __future__ import annotations

from uuid import UUID

from platformkit.ids import uuid7

from strataplane import errors
from strataplane.actions.access import PlatformTx, platform_tx
from strataplane.actions.context import Ctx
from strataplane.store import bindings, members, tenants, users


async def grant_admin(tx: PlatformTx, tenant_id: UUID, user_id: UUID, *, field: str) -> bool:
    """Make the human user an enabled member of the tenant holding admin over it; whether
    anything changed."""
    user = await users.get_user(tx.conn, user_id)
    if user is None:
        raise errors.UserNotFound(field=field)
    if user.kind != "human":
        raise errors.NotHuman(field=field)
    if user.disabled_at is not None:
        raise errors.InvalidInput("the user is disabled; enable the user first", field=field)
    changed = False
    member = await members.get_member(tx.conn, tenant_id, user_id)
    if member is None:
        await members.insert_member(tx.conn, tenant_id, user_id, "local")
        await tx.audit_tenant(tenant_id, "member.add", "member", user_id, {"source": "local"})
        changed = True
    elif member.disabled_at is not None:
        await members.set_disabled(tx.conn, tenant_id, user_id, False)
        await tx.audit_tenant(tenant_id, "member.enable", "member", user_id)
        changed = True
    held = await bindings.list_bindings(tx.conn, tenant_id, user_id=user_id, limit=500)
    if not any(b.role == "admin" for b in held):
        binding = await bindings.insert_binding(
            tx.conn,
            tenant_id,
            uuid7(),
            user_id=user_id,
            team_id=None,
            role="admin",
            scope_kind="tenant",
            scope_team_id=None,
            scope_selector=None,
            created_by=tx.ctx.user_id,
        )
        await tx.audit_tenant(
            tenant_id,
            "role_binding.create",
            "role_binding",
            binding.id,
            {"user_id": str(user_id), "role": "admin", "scope_kind": "tenant"},
        )
        changed = True
    return changed


async def restore_tenant_admin(ctx: Ctx, tenant_id: UUID, user_id: UUID) -> bool:
    """A platform admin (or the CLI) makes ``user_id`` an admin of the tenant again."""
    async with platform_tx(ctx) as tx:
        tenant = await tenants.get_tenant(tx.conn, tenant_id, lock=True)
        if tenant is None:
            raise errors.TenantNotFound()
        if tenant.state == "deleting":
            raise errors.TenantDeleting()
        changed = await grant_admin(tx, tenant_id, user_id, field="user_id")
        await tx.audit(
            "tenant.admin_restore",
            "tenant",
            tenant_id,
            tenant_id=tenant_id,
            details={"user_id": str(user_id), "changed": changed},
        )
    return changed
