"""Users and their tenant role (04-API-SPEC §10.3). Humans sign in through an IdP; these
actions create the rows the console and API then manage."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import psycopg
from platformkit.db.scope import Conn

from agentbus.actions.access import require_tenant_admin, require_tenant_owner, tenant_scope
from agentbus.actions.audit import record_action
from agentbus.actions.context import Ctx
from agentbus.actions.validate import TENANT_ROLES, check_email, check_one_of, check_text
from agentbus.errors import AlreadyExists, NotFound, StateConflict
from agentbus.ids import format_id
from agentbus.store import integration_tokens, users

Row = dict[str, Any]


@dataclass(frozen=True)
class OwnerSpec:
    """A user to create: e-mail, IdP (``clerk``, ``oidc:<issuer>``...) and the IdP subject."""

    email: str
    idp: str
    idp_subject: str
    display_name: str | None = None


async def add_user(conn: Conn, ctx: Ctx, tenant_id: uuid.UUID, spec: OwnerSpec, role: str) -> Row:
    """Insert the user and its tenant membership inside the caller's tenant transaction."""
    check_one_of(role, TENANT_ROLES, "role")
    user_id = await users.insert_user(
        conn,
        tenant_id,
        idp=check_text(spec.idp, "idp"),
        idp_subject=check_text(spec.idp_subject, "idp_subject", max_length=500),
        email=check_email(spec.email),
        display_name=check_text(spec.display_name, "display_name", required=False) or None,
    )
    await users.add_tenant_membership(conn, tenant_id, user_id, role)
    await record_action(
        conn,
        ctx,
        tenant_id,
        "user.create",
        target_type="user",
        target_id=format_id("usr", user_id),
        details={"role": role, "idp": spec.idp},
    )
    row = await users.get_user(conn, tenant_id, user_id)
    assert row is not None
    return row


async def create_user(
    ctx: Ctx, tenant_id: uuid.UUID, spec: OwnerSpec, *, role: str = "member"
) -> Row:
    """AB-8003 when the e-mail or the IdP subject is already a user of the tenant."""
    try:
        async with tenant_scope(ctx, tenant_id) as (conn, _tenant):
            await require_tenant_admin(conn, ctx, tenant_id)
            if role == "owner":
                await require_tenant_owner(conn, ctx, tenant_id)
            return await add_user(conn, ctx, tenant_id, spec, role)
    except psycopg.errors.UniqueViolation as exc:
        raise AlreadyExists("a user with this e-mail or IdP subject exists", field="email") from exc


async def list_users(ctx: Ctx, tenant_id: uuid.UUID) -> list[Row]:
    async with tenant_scope(ctx, tenant_id) as (conn, _tenant):
        await require_tenant_admin(conn, ctx, tenant_id)
        return await users.list_users(conn, tenant_id)


async def get_user(ctx: Ctx, tenant_id: uuid.UUID, user_id: uuid.UUID) -> Row:
    async with tenant_scope(ctx, tenant_id) as (conn, _tenant):
        await require_tenant_admin(conn, ctx, tenant_id)
        row = await users.get_user(conn, tenant_id, user_id)
    if row is None:
        raise NotFound(f"no user {format_id('usr', user_id)}")
    return row


USER_STATUSES = ("active", "disabled")


async def change_user(
    ctx: Ctx,
    tenant_id: uuid.UUID,
    user_id: uuid.UUID,
    *,
    status: str | None = None,
    tenant_role: str | None = None,
) -> tuple[Row, list[Row]]:
    """Disable or enable a user, or change its tenant role (04 §10.3); the user and its tokens
    still in force, which disabling does not revoke. Making or unmaking an owner takes an
    owner; leaving the tenant without an active owner is AB-8008."""
    if status is not None:
        check_one_of(status, USER_STATUSES, "status")
    if tenant_role is not None:
        check_one_of(tenant_role, TENANT_ROLES, "tenant_role")
    async with tenant_scope(ctx, tenant_id) as (conn, _tenant):
        await require_tenant_admin(conn, ctx, tenant_id)
        owners = await users.lock_owners(conn, tenant_id)
        row = await users.get_user(conn, tenant_id, user_id)
        if row is None:
            raise NotFound(f"no user {format_id('usr', user_id)}")
        role_changes = tenant_role is not None and tenant_role != row["tenant_role"]
        if role_changes and "owner" in (row["tenant_role"], tenant_role):
            await require_tenant_owner(conn, ctx, tenant_id)
        role, state = tenant_role or row["tenant_role"], status or row["status"]
        if owners == [user_id] and (role, state) != ("owner", "active"):
            raise StateConflict("the tenant would be left without an active owner")
        if status is not None:
            await users.set_status(conn, tenant_id, user_id, status)
        if tenant_role is not None:
            await users.set_tenant_role(conn, tenant_id, user_id, tenant_role)
        await record_action(
            conn, ctx, tenant_id, "user.update", target_type="user",
            target_id=format_id("usr", user_id),
            details={k: v for k, v in (("status", status), ("tenant_role", tenant_role)) if v},
        )  # fmt: skip
        changed = await users.get_user(conn, tenant_id, user_id)
        tokens = await integration_tokens.list_tokens(conn, tenant_id, owner_user_id=user_id)
    assert changed is not None
    now = datetime.now(UTC)
    return changed, [t for t in tokens if t["expires_at"] is None or t["expires_at"] > now]
