"""Tenants: create (platform operator), list (platform operator), suspend, republish what a lost
stream held (platform operator), and update (its owner or an admin) (04-API-SPEC §10.1).

A tenant is created in its own scope: the new id is set as ``app.tenant_id`` first, so every row
(tenant, subscription, data key, owner, membership, bootstrap token, audit) passes RLS as the
gateway role. The JetStream stream is created after commit by the messaging layer.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

import psycopg
from platformkit.db.scope import tenant_transaction, transaction
from platformkit.ids import uuid7

from agentbus.actions.access import require_platform, require_tenant_admin, tenant_scope
from agentbus.actions.audit import record_action
from agentbus.actions.context import Ctx
from agentbus.actions.tokens import IssuedToken, issue_token
from agentbus.actions.users import OwnerSpec, add_user
from agentbus.actions.validate import PLANS, check_one_of, check_settings, check_slug, check_text
from agentbus.db import SCOPE
from agentbus.errors import AgentBusError, AlreadyExists, RequestInvalid, StateConflict
from agentbus.gateway.store import messages
from agentbus.ids import format_id
from agentbus.keys import PLATFORM_KEK, add_tenant_key
from agentbus.policies.actions import create_default
from agentbus.store import integration_tokens, plans, tenants

Row = dict[str, Any]


@dataclass(frozen=True)
class CreatedTenant:
    tenant: Row
    owner_user: Row | None = None
    bootstrap_token: IssuedToken | None = None


async def create_tenant(
    ctx: Ctx,
    *,
    slug: str,
    display_name: str,
    plan: str = "starter",
    region: str = "eu-west",
    owner: OwnerSpec | None = None,
) -> CreatedTenant:
    """Tenant, subscription, data key version 1 and, with ``owner``, the owner user, their
    ``owner`` membership, the default policy (allow all) and a tenant-wide bootstrap token with
    every scope."""
    require_platform(ctx)
    if ctx.keyring is None:
        raise AgentBusError("creating a tenant needs the deployment keyring")
    check_slug(slug)
    display_name = check_text(display_name, "display_name")
    check_one_of(plan, PLANS, "plan")
    region = check_text(region, "region", max_length=40)
    tenant_id = uuid7()
    try:
        async with tenant_transaction(ctx.pool, SCOPE, tenant_id) as conn:
            limits = await plans.plan_limits(conn, plan) or {}
            tenant = await tenants.insert_tenant(
                conn,
                tenant_id,
                slug=slug,
                display_name=display_name,
                plan=plan,
                region=region,
                retention_days=int(limits.get("retention_days", 7)),
                kek_ref=PLATFORM_KEK,
            )
            await plans.insert_subscription(conn, tenant_id, plan)
            await add_tenant_key(conn, ctx.keyring, tenant_id)
            await record_action(
                conn,
                ctx,
                tenant_id,
                "tenant.create",
                target_type="tenant",
                target_id=format_id("ten", tenant_id),
                details={"slug": slug, "plan": plan, "region": region},
            )
            if owner is None:
                return CreatedTenant(tenant)
            user = await add_user(conn, ctx, tenant_id, owner, role="owner")
            await create_default(conn, ctx, tenant_id, user["id"])
            token = await issue_token(
                conn,
                ctx,
                tenant_id,
                owner_user_id=user["id"],
                name="bootstrap",
                scopes=integration_tokens.SCOPES,
            )
            return CreatedTenant(tenant, user, token)
    except psycopg.errors.UniqueViolation as exc:
        if exc.diag.constraint_name == "tenants_slug_key":
            raise AlreadyExists(f"tenant slug {slug!r} is taken", field="slug") from exc
        raise


async def list_tenants(ctx: Ctx) -> list[Row]:
    require_platform(ctx)
    async with transaction(ctx.pool) as conn:
        return await tenants.list_all_tenants(conn)


async def suspend_tenant(ctx: Ctx, tenant_id: uuid.UUID, *, reason: str | None = None) -> Row:
    """``active`` -> ``suspended``; the gateway then refuses the tenant's tokens (AB-1013)."""
    return await _move(ctx, tenant_id, "suspended", "active", "tenant.suspend", reason)


async def resume_tenant(ctx: Ctx, tenant_id: uuid.UUID, *, reason: str | None = None) -> Row:
    """``suspended`` -> ``active``: the tenant's tokens and agents work again (their own
    revocations and disabled agents stay as they were)."""
    return await _move(ctx, tenant_id, "active", "suspended", "tenant.resume", reason)


async def republish_undelivered(
    ctx: Ctx, tenant_id: uuid.UUID, *, reason: str | None = None, record_none: bool = True
) -> int:
    """After the tenant's stream lost its data (05 §13.2), by the platform operator or the
    gateway that created the stream again: every message still waiting for delivery is
    published again by the reconciler; how many. Safe where the stream kept them: a copy
    delivered twice is suppressed at the gateway and in the sidecar (05 §10.3, §10.4). Audit
    row ``tenant.republish`` with the count (none for a count of 0 unless ``record_none``)."""
    require_platform(ctx)
    async with tenant_scope(ctx, tenant_id) as (conn, _tenant):
        count = await messages.unpublish_undelivered(conn, tenant_id)
        if count == 0 and not record_none:
            return 0
        await record_action(
            conn, ctx, tenant_id, "tenant.republish", target_type="tenant",
            target_id=format_id("ten", tenant_id), details={"reason": reason, "messages": count},
        )  # fmt: skip
        return count


async def _move(
    ctx: Ctx, tenant_id: uuid.UUID, to: str, source: str, action: str, reason: str | None
) -> Row:
    """The platform operator moves the tenant from ``source`` to ``to`` (AB-8008 from any
    other status), with the audit row ``action``."""
    require_platform(ctx)
    async with tenant_scope(ctx, tenant_id) as (conn, tenant):
        row = await tenants.set_tenant_status(conn, tenant_id, to, only_from=[source])
        if row is None:
            raise StateConflict(
                f"tenant is {tenant['status']}, not {source}", tenant_status=tenant["status"]
            )
        await record_action(
            conn, ctx, tenant_id, action, target_type="tenant",
            target_id=format_id("ten", tenant_id), details={"reason": reason},
        )  # fmt: skip
        return row


async def read_tenant(ctx: Ctx, tenant_id: uuid.UUID) -> tuple[Row, dict[str, Any]]:
    """The tenant and its effective plan limits (04 §10.1); a user of another tenant is
    AB-8002."""
    async with tenant_scope(ctx, tenant_id) as (conn, tenant):
        return tenant, await plans.effective_limits(conn, tenant_id)


RETENTION_DAYS_MAX = 3650
RETENTION_OVERRIDE_PLAN = "enterprise"


async def update_tenant(ctx: Ctx, tenant_id: uuid.UUID, changes: dict[str, Any]) -> Row:
    """``display_name``, ``settings`` and, on the enterprise plan only, ``retention_days``
    (04 §10.1), by a tenant owner or admin; the tenant's stream keeps messages as long after
    commit (the caller's part)."""
    if "display_name" in changes:
        changes["display_name"] = check_text(changes["display_name"], "display_name")
    if "settings" in changes:
        changes["settings"] = check_settings(changes["settings"])
    async with tenant_scope(ctx, tenant_id) as (conn, tenant):
        await require_tenant_admin(conn, ctx, tenant_id)
        if "retention_days" in changes:
            days = changes["retention_days"]
            if tenant["plan"] != RETENTION_OVERRIDE_PLAN:
                raise RequestInvalid(
                    f"retention is set by the {tenant['plan']} plan; only the enterprise plan "
                    "sets its own",
                    field="retention_days",
                )
            if not 1 <= days <= RETENTION_DAYS_MAX:
                raise RequestInvalid(
                    f"retention_days is 1 to {RETENTION_DAYS_MAX}", field="retention_days"
                )
        row = await tenants.update_tenant(conn, tenant_id, changes)
        assert row is not None  # tenant_scope found it
        details: dict[str, Any] = {"changed": sorted(changes)}
        if "retention_days" in changes:
            details["retention_days"] = [tenant["retention_days"], row["retention_days"]]
        await record_action(
            conn, ctx, tenant_id, "tenant.update", target_type="tenant",
            target_id=format_id("ten", tenant_id), details=details,
        )  # fmt: skip
        return row
