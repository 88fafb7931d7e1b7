"""Role bindings: a role for a user (human or service account) or a team, over the whole
tenant, the objects a team owns, or the hosts a selector matches. admin is bound with tenant
scope only. Tenant admins manage them."""

from __future__ import annotations

from typing import Any
from uuid import UUID

import psycopg
from platformkit.ids import uuid7

from strataplane import authz, errors
from strataplane.actions.access import TenantTx, tenant_tx
from strataplane.actions.context import Ctx
from strataplane.domain.spec.diagnostics import SpecError
from strataplane.domain.spec.selectors import selector_from_json
from strataplane.store import bindings, members, teams
from strataplane.store.bindings import RoleBinding


def selector_problems(selector: Any) -> list[str]:
    """The JSON form of a selector (spec-format.md §2.3), with its SP-3xxx diagnostics."""
    try:
        selector_from_json(selector)
    except SpecError as exc:
        return [f"{d.code} {d.message}" for d in exc.diagnostics]
    return []


async def _check_subject(tx: TenantTx, user_id: UUID | None, team_id: UUID | None) -> None:
    if (user_id is None) == (team_id is None):
        raise errors.InvalidInput("bind a user or a team, not both", field="user_id")
    if user_id is not None and await members.get_member(tx.conn, tx.tenant_id, user_id) is None:
        raise errors.MemberNotFound(field="user_id")
    if team_id is not None and await teams.get_team(tx.conn, tx.tenant_id, team_id) is None:
        raise errors.TeamNotFound(field="team_id")


async def _check_scope(
    tx: TenantTx, role: str, kind: str, team_id: UUID | None, selector: Any
) -> None:
    if role not in authz.ROLES:
        raise errors.InvalidInput(f"unknown role {role!r}", field="role")
    if kind not in authz.SCOPE_KINDS:
        raise errors.InvalidScope(f"unknown scope kind {kind!r}", field="scope_kind")
    if role == "admin" and kind != "tenant":
        raise errors.InvalidScope("admin is bound to the whole tenant only", field="scope_kind")
    if (kind == "owner") != (team_id is not None):
        raise errors.InvalidScope("scope_team_id goes with scope kind owner", field="scope_team_id")
    if (kind == "selector") != (selector is not None):
        raise errors.InvalidScope(
            "scope_selector goes with scope kind selector", field="scope_selector"
        )
    if team_id is not None and await teams.get_team(tx.conn, tx.tenant_id, team_id) is None:
        raise errors.TeamNotFound(field="scope_team_id")
    problems = selector_problems(selector) if selector is not None else []
    if problems:
        raise errors.InvalidScope("; ".join(problems), field="scope_selector")


async def create_role_binding(
    ctx: Ctx,
    *,
    role: str,
    user_id: UUID | None = None,
    team_id: UUID | None = None,
    scope_kind: str = "tenant",
    scope_team_id: UUID | None = None,
    scope_selector: dict[str, Any] | None = None,
) -> RoleBinding:
    async with tenant_tx(ctx) as tx:
        tx.require("tenant.admin")
        await _check_subject(tx, user_id, team_id)
        await _check_scope(tx, role, scope_kind, scope_team_id, scope_selector)
        try:
            async with tx.conn.transaction():
                binding = await bindings.insert_binding(
                    tx.conn,
                    tx.tenant_id,
                    uuid7(),
                    user_id=user_id,
                    team_id=team_id,
                    role=role,
                    scope_kind=scope_kind,
                    scope_team_id=scope_team_id,
                    scope_selector=scope_selector,
                    created_by=ctx.user_id,
                )
        except psycopg.errors.UniqueViolation:
            raise errors.RoleBindingExists() from None
        await tx.audit(
            "role_binding.create",
            "role_binding",
            binding.id,
            {
                "user_id": str(user_id) if user_id else None,
                "team_id": str(team_id) if team_id else None,
                "role": role,
                "scope_kind": scope_kind,
            },
        )
    return binding


async def list_role_bindings(
    ctx: Ctx,
    *,
    user_id: UUID | None = None,
    team_id: UUID | None = None,
    after: UUID | None = None,
    limit: int = 100,
) -> list[RoleBinding]:
    async with tenant_tx(ctx) as tx:
        tx.require("tenant.admin")
        return await bindings.list_bindings(
            tx.conn, tx.tenant_id, user_id=user_id, team_id=team_id, after=after, limit=limit
        )


async def access_role_binding(ctx: Ctx, binding_id: UUID) -> RoleBinding:
    async with tenant_tx(ctx) as tx:
        tx.require("tenant.admin")
        binding = await bindings.get_binding(tx.conn, tx.tenant_id, binding_id)
    if binding is None:
        raise errors.RoleBindingNotFound()
    return binding


async def delete_role_binding(ctx: Ctx, binding_id: UUID) -> None:
    async with tenant_tx(ctx) as tx:
        tx.require("tenant.admin")
        binding = await bindings.get_binding(tx.conn, tx.tenant_id, binding_id)
        if binding is None:
            raise errors.RoleBindingNotFound()
        async with tx.keeping_an_admin():
            await bindings.delete_binding(tx.conn, tx.tenant_id, binding_id)
        await tx.audit("role_binding.delete", "role_binding", binding_id, {"role": binding.role})
