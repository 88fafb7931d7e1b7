"""Tenants: created, suspended, resumed and deleted by platform admins (platform scope).

tenant_state: active <-> suspended; active or suspended -> deleting, which is final: the
deletion operation removes the tenant's rows and the tenant row last. Creating a tenant writes
its four counters and r1, the empty revision, and may make an existing user its first admin.
"""

from __future__ import annotations

import re
from typing import Any
from uuid import UUID

import psycopg
from platformkit.ids import uuid7
from platformkit.jobs import spawn

from strataplane import errors
from strataplane.actions.access import platform_tx
from strataplane.actions.context import Ctx
from strataplane.actions.tenant_admins import grant_admin
from strataplane.db import QUEUE
from strataplane.store import counters, operations, spec, tenants
from strataplane.store.operations import Operation
from strataplane.store.tenants import Tenant

SLUG = re.compile(r"^[a-z0-9]([a-z0-9-]{0,30}[a-z0-9])?$")
DELETE_TASK = "tenant.delete"


def check_slug(slug: str) -> None:
    if not SLUG.fullmatch(slug):
        raise errors.InvalidSlug(
            "1 to 32 characters: a-z, 0-9 and '-', starting and ending with a letter or digit",
            field="slug",
        )


async def create_tenant(
    ctx: Ctx,
    slug: str,
    display_name: str,
    *,
    limits: dict[str, Any] | None = None,
    admin_user_id: UUID | None = None,
) -> Tenant:
    check_slug(slug)
    async with platform_tx(ctx) as tx:
        shards = await tenants.installation_shards(tx.conn) or 1
        shard = await tenants.pick_shard(tx.conn, shards)
        try:
            tenant = await tenants.insert_tenant(
                tx.conn, uuid7(), slug, display_name, shard, limits or {}
            )
        except psycopg.errors.UniqueViolation:
            raise errors.TenantSlugTaken(field="slug") from None
        await counters.init_counters(tx.conn, tenant.id)
        await spec.insert_initial_revision(tx.conn, tenant.id)
        await tx.audit_tenant(tenant.id, "tenant.create", "tenant", tenant.id, {"slug": slug})
        if admin_user_id is not None:
            await grant_admin(tx, tenant.id, admin_user_id, field="admin_user_id")
        await tx.audit(
            "tenant.create",
            "tenant",
            tenant.id,
            tenant_id=tenant.id,
            details={"slug": slug, "shard": shard},
        )
    return tenant


async def list_tenants(ctx: Ctx, *, after: str | None = None, limit: int = 100) -> list[Tenant]:
    async with platform_tx(ctx) as tx:
        return await tenants.list_tenants(tx.conn, after=after, limit=limit)


async def access_tenant(ctx: Ctx, tenant_id: UUID) -> Tenant:
    async with platform_tx(ctx) as tx:
        tenant = await tenants.get_tenant(tx.conn, tenant_id)
    if tenant is None:
        raise errors.TenantNotFound()
    return tenant


async def _transition(ctx: Ctx, tenant_id: UUID, source: str, target: str, action: str) -> Tenant:
    async with platform_tx(ctx) as tx:
        tenant = await tenants.get_tenant(tx.conn, tenant_id, lock=True)
        if tenant is None:
            raise errors.TenantNotFound()
        if tenant.state == target:
            return tenant
        if tenant.state != source:
            raise errors.TenantInvalidState(f"the tenant is {tenant.state}", state=tenant.state)
        tenant = await tenants.set_state(tx.conn, tenant_id, target)
        await tx.audit_tenant(tenant_id, action, "tenant", tenant_id)
        await tx.audit(action, "tenant", tenant_id, tenant_id=tenant_id)
    return tenant


async def suspend_tenant(ctx: Ctx, tenant_id: UUID) -> Tenant:
    """No logins and no API tokens while suspended; agents keep what they have."""
    return await _transition(ctx, tenant_id, "active", "suspended", "tenant.suspend")


async def resume_tenant(ctx: Ctx, tenant_id: UUID) -> Tenant:
    return await _transition(ctx, tenant_id, "suspended", "active", "tenant.resume")


async def delete_tenant(ctx: Ctx, tenant_id: UUID) -> Operation:
    """Reject every request of the tenant from now on and queue the deletion operation; a
    repeat while it is queued or running returns that operation."""
    async with platform_tx(ctx) as tx:
        tenant = await tenants.get_tenant(tx.conn, tenant_id, lock=True)
        if tenant is None:
            raise errors.TenantNotFound()
        # A platform operation (tenant_id NULL): it outlives the tenant's rows.
        op, created = await operations.insert_or_get_active(
            tx.conn,
            uuid7(),
            tenant_id=None,
            kind=DELETE_TASK,
            object_id=str(tenant_id),
            created_by=tx.ctx.user_id,
        )
        if not created:
            return op
        if tenant.state != "deleting":
            await tenants.set_state(tx.conn, tenant_id, "deleting")
        params = {"operation_id": str(op.id), "tenant_id": str(tenant_id)}
        await spawn(tx.conn, QUEUE, DELETE_TASK, params, idempotency_key=f"{DELETE_TASK}:{op.id}")
        await tx.audit(
            "tenant.delete",
            "tenant",
            tenant_id,
            tenant_id=tenant_id,
            details={"operation_id": str(op.id), "slug": tenant.slug},
        )
    return op


async def access_platform_operation(ctx: Ctx, operation_id: UUID) -> Operation:
    async with platform_tx(ctx) as tx:
        op = await operations.get_operation(tx.conn, None, operation_id)
    if op is None:
        raise errors.OperationNotFound()
    return op
