"""The gate every tenant and platform action passes: scope, state, membership, permission.

``tenant_tx(ctx)`` opens the tenant transaction (RLS shows only the tenant's rows), re-reads the
tenant's state and the caller's membership (so disabling either ends open sessions), loads the
effective role bindings, and gives the action ``require`` and ``audit``. ``platform_tx(ctx)``
opens platform scope for platform admins using a platform credential, and the system.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

from platformkit.db.scope import Conn, platform_transaction, tenant_transaction

from strataplane import authz, errors
from strataplane.actions.context import Ctx
from strataplane.db import SCOPE
from strataplane.errors import LastAdmin
from strataplane.store import audit, bindings, counters, members, platform_audit, tenants


@dataclass
class TenantTx:
    conn: Conn
    ctx: Ctx
    tenant_id: UUID
    bindings: list[authz.Binding]
    used: set[UUID] = field(default_factory=set)

    def decide(self, permission: str, target: authz.Target = authz.TENANT) -> authz.Decision:
        if self.ctx.principal is None:
            return authz.Decision(permission, True)
        return authz.decide(
            self.bindings, permission, target, token_roles=self.ctx.principal.token_roles
        )

    def require(self, permission: str, target: authz.Target = authz.TENANT) -> None:
        decision = self.decide(permission, target)
        if not decision.allowed:
            raise errors.PermissionDenied(
                f"this needs the permission {permission}", permission=permission
            )
        self.used.update(decision.bindings)

    def roles(self) -> set[str]:
        """Roles of the effective bindings (after the token's allowlist)."""
        allow = self.ctx.principal.token_roles if self.ctx.principal else None
        return {b.role for b in self.bindings if allow is None or b.role in allow}

    def require_member_with_role(self) -> None:
        """Every member with a role may manage their own tokens (architecture.md §5.2)."""
        if self.ctx.principal is not None and not self.roles():
            raise errors.PermissionDenied("no role binding in this tenant", permission="any role")

    @asynccontextmanager
    async def keeping_an_admin(self) -> AsyncIterator[None]:
        """Around a write that may remove an admin: refuses it (and so rolls it back) when the
        tenant had an enabled human admin before and has none after. The audit counter's lock,
        taken first, makes such writes run one after the other, so two admins removing each
        other cannot both pass."""
        await counters.lock(self.conn, self.tenant_id, "audit")
        before = await bindings.active_admins(self.conn, self.tenant_id)
        yield
        if before and not await bindings.active_admins(self.conn, self.tenant_id):
            raise LastAdmin(
                "a tenant keeps at least one enabled admin; make someone else admin first"
            )

    async def audit(
        self,
        action: str,
        object_kind: str,
        object_id: object,
        details: Mapping[str, Any] | None = None,
    ) -> None:
        """Append the action's event: call as the last write of the transaction."""
        actor_kind, actor_id = self.ctx.actor
        body = dict(details or {})
        if self.ctx.principal is not None:
            body["authz"] = {
                "package": authz.AUTHZ_PACKAGE,
                "bindings": [str(b) for b in sorted(self.used)],
            }
        event = audit.Event(
            actor_kind,
            actor_id,
            action,
            object_kind,
            str(object_id),
            request_id=self.ctx.request_id,
            source_ip=self.ctx.source_ip,
            details=body,
        )
        await audit.append(self.conn, self.tenant_id, event)


async def check_tenant(conn: Conn, tenant_id: UUID, *, system: bool = False) -> tenants.Tenant:
    """deleting rejects every request; suspended allows no logins and no API use (the system
    still acts)."""
    tenant = await tenants.get_tenant(conn, tenant_id)
    if tenant is None:
        raise errors.TenantNotFound()
    if tenant.state == "deleting":
        raise errors.TenantDeleting()
    if tenant.state == "suspended" and not system:
        raise errors.TenantSuspended()
    return tenant


@asynccontextmanager
async def tenant_tx(ctx: Ctx) -> AsyncIterator[TenantTx]:
    if ctx.tenant_id is None:
        raise errors.AuthRequired("this request needs a credential bound to a tenant")
    async with tenant_transaction(ctx.pool, SCOPE, ctx.tenant_id) as conn:
        await check_tenant(conn, ctx.tenant_id, system=ctx.principal is None)
        found: list[authz.Binding] = []
        if ctx.principal is not None:
            member = await members.get_member(conn, ctx.tenant_id, ctx.principal.user_id)
            if member is None or not member.active:
                raise errors.MembershipDisabled()
            rows = await bindings.effective_bindings(
                conn, ctx.tenant_id, ctx.principal.user_id, with_teams=member.kind == "human"
            )
            found = [
                authz.Binding(r.id, r.role, r.scope_kind, r.scope_team_id, r.scope_selector)
                for r in rows
            ]
        yield TenantTx(conn, ctx, ctx.tenant_id, found)


async def check_member(ctx: Ctx) -> None:
    """An active member with a role in the tenant (before claiming an Idempotency-Key)."""
    async with tenant_tx(ctx) as tx:
        tx.require_member_with_role()


@dataclass
class PlatformTx:
    conn: Conn
    ctx: Ctx

    async def audit(
        self,
        action: str,
        object_kind: str,
        object_id: object,
        *,
        tenant_id: UUID | None = None,
        details: Mapping[str, Any] | None = None,
    ) -> None:
        actor_kind, actor_id = self.ctx.actor
        event = platform_audit.PlatformEvent(
            actor_kind,
            actor_id,
            action,
            object_kind,
            str(object_id),
            tenant_id=tenant_id,
            request_id=self.ctx.request_id,
            source_ip=self.ctx.source_ip,
            details=dict(details or {}),
        )
        await platform_audit.append(self.conn, event)

    async def audit_tenant(
        self,
        tenant_id: UUID,
        action: str,
        object_kind: str,
        object_id: object,
        details: Mapping[str, Any] | None = None,
    ) -> None:
        """A tenant-chain event written by a platform action (its tenant's rows change)."""
        actor_kind, actor_id = self.ctx.actor
        event = audit.Event(
            actor_kind,
            actor_id,
            action,
            object_kind,
            str(object_id),
            request_id=self.ctx.request_id,
            source_ip=self.ctx.source_ip,
            details={"platform": True, **(details or {})},
        )
        await audit.append(self.conn, tenant_id, event)


def require_platform_admin(ctx: Ctx) -> None:
    principal = ctx.principal
    if principal is not None and not (principal.platform_admin and principal.platform):
        raise errors.PlatformAdminRequired()


@asynccontextmanager
async def platform_tx(ctx: Ctx) -> AsyncIterator[PlatformTx]:
    require_platform_admin(ctx)
    async with platform_transaction(ctx.pool, SCOPE) as conn:
        yield PlatformTx(conn, ctx)
