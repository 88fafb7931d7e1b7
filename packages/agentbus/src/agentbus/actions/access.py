"""Tenant scopes for actions and the role checks of 04-API-SPEC §1.2."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from platformkit.db.scope import Conn, tenant_transaction

from agentbus.actions.context import Ctx
from agentbus.db import SCOPE
from agentbus.errors import NotFound, RoleRequired
from agentbus.ids import format_id
from agentbus.store import tenants, users

TENANT_ADMIN_ROLES = frozenset({"owner", "admin"})


@asynccontextmanager
async def tenant_scope(
    ctx: Ctx, tenant_id: uuid.UUID
) -> AsyncIterator[tuple[Conn, dict[str, Any]]]:
    """A transaction in ``tenant_id``'s scope and its tenant row. A user of another tenant, or a
    tenant that does not exist, is the same AB-8002."""
    if ctx.actor.type == "user" and ctx.actor.tenant_id != tenant_id:
        raise NotFound(f"no tenant {format_id('ten', tenant_id)}")
    async with tenant_transaction(ctx.pool, SCOPE, tenant_id) as conn:
        tenant = await tenants.get_tenant(conn, tenant_id)
        if tenant is None:
            raise NotFound(f"no tenant {format_id('ten', tenant_id)}")
        yield conn, tenant


def require_platform(ctx: Ctx) -> None:
    if ctx.actor.type not in ("platform", "system"):
        raise RoleRequired("only the platform operator may do this")


async def _user_role(conn: Conn, ctx: Ctx, tenant_id: uuid.UUID) -> str | None:
    if ctx.actor.type != "user" or ctx.actor.user_id is None:
        return None
    return await users.tenant_role(conn, tenant_id, ctx.actor.user_id)


async def require_tenant_admin(conn: Conn, ctx: Ctx, tenant_id: uuid.UUID) -> None:
    """Platform operators and system jobs pass; a user needs tenant role owner or admin."""
    if ctx.actor.type in ("platform", "system"):
        return
    if await _user_role(conn, ctx, tenant_id) not in TENANT_ADMIN_ROLES:
        raise RoleRequired("a tenant owner or admin role is required")


async def require_tenant_owner(conn: Conn, ctx: Ctx, tenant_id: uuid.UUID) -> None:
    if ctx.actor.type in ("platform", "system"):
        return
    if await _user_role(conn, ctx, tenant_id) != "owner":
        raise RoleRequired("the tenant owner role is required")
