"""Workspaces (04-API-SPEC §10.2), the model resource: schema -> store -> action -> route."""

from __future__ import annotations

import uuid
from typing import Any

import psycopg
from platformkit.db.scope import Conn

from agentbus.actions.access import require_tenant_admin, tenant_scope
from agentbus.actions.audit import record_action
from agentbus.actions.context import Ctx
from agentbus.actions.validate import check_one_of, check_settings, check_slug, check_text
from agentbus.errors import AlreadyExists, NotFound, PlanLimitReached, StateConflict
from agentbus.ids import format_id
from agentbus.store import plans, users, workspaces

Row = dict[str, Any]


async def create_workspace(
    ctx: Ctx,
    tenant_id: uuid.UUID,
    *,
    slug: str,
    display_name: str,
    description: str | None = None,
) -> Row:
    """AB-8001 (slug), AB-8003 (slug taken in the tenant), AB-5006 (plan ``workspaces``)."""
    check_slug(slug)
    display_name = check_text(display_name, "display_name")
    description = check_text(description, "description", max_length=2000, required=False) or None
    try:
        async with tenant_scope(ctx, tenant_id) as (conn, _tenant):
            await require_tenant_admin(conn, ctx, tenant_id)
            limit = (await plans.effective_limits(conn, tenant_id)).get("workspaces")
            if (
                limit is not None
                and await workspaces.count_live_workspaces(conn, tenant_id) >= limit
            ):
                raise PlanLimitReached(f"the plan allows {limit} workspaces", limit="workspaces")
            row = await workspaces.insert_workspace(
                conn, tenant_id, slug=slug, display_name=display_name, description=description
            )
            await record_action(
                conn,
                ctx,
                tenant_id,
                "workspace.create",
                target_type="workspace",
                target_id=format_id("ws", row["id"]),
                details={"slug": slug},
            )
            return row
    except psycopg.errors.UniqueViolation as exc:
        raise AlreadyExists(f"workspace slug {slug!r} is taken", field="slug") from exc


async def list_workspaces(ctx: Ctx, tenant_id: uuid.UUID) -> list[Row]:
    async with tenant_scope(ctx, tenant_id) as (conn, _tenant):
        return await workspaces.list_workspaces(conn, tenant_id)


async def _live(conn: Conn, tenant_id: uuid.UUID, workspace_id: uuid.UUID) -> Row:
    row = await workspaces.get_workspace(conn, tenant_id, workspace_id)
    if row is None or row["deleted_at"] is not None:
        raise NotFound(f"no workspace {format_id('ws', workspace_id)}")
    return row


async def get_workspace(ctx: Ctx, tenant_id: uuid.UUID, workspace_id: uuid.UUID) -> Row:
    async with tenant_scope(ctx, tenant_id) as (conn, _tenant):
        return await _live(conn, tenant_id, workspace_id)


WS_ROLES = ("admin", "member", "viewer")


async def list_members(ctx: Ctx, tenant_id: uuid.UUID, workspace_id: uuid.UUID) -> list[Row]:
    async with tenant_scope(ctx, tenant_id) as (conn, _tenant):
        await _live(conn, tenant_id, workspace_id)
        return await workspaces.list_members(conn, tenant_id, workspace_id)


async def _keep_an_admin(
    conn: Conn, tenant_id: uuid.UUID, workspace_id: uuid.UUID, user_id: uuid.UUID
) -> None:
    """AB-8008 when ``user_id`` is the workspace's last admin, about to be removed or demoted."""
    if await workspaces.lock_admins(conn, tenant_id, workspace_id) == [user_id]:
        raise StateConflict(
            f"{format_id('usr', user_id)} is the workspace's last admin; make another member "
            "admin first"
        )


async def set_member(
    ctx: Ctx, tenant_id: uuid.UUID, workspace_id: uuid.UUID, user_id: uuid.UUID, role: str
) -> Row:
    """Add a tenant member to the workspace with ``role``, or change its role; a user who is
    not a member of the tenant is AB-8008."""
    check_one_of(role, WS_ROLES, "role")
    async with tenant_scope(ctx, tenant_id) as (conn, _tenant):
        await require_tenant_admin(conn, ctx, tenant_id)
        await _live(conn, tenant_id, workspace_id)
        if await users.tenant_role(conn, tenant_id, user_id) is None:
            raise StateConflict(f"{format_id('usr', user_id)} is not a member of the tenant")
        if role != "admin":
            await _keep_an_admin(conn, tenant_id, workspace_id, user_id)
        row = await workspaces.set_member(
            conn, tenant_id, workspace_id, user_id, role, ctx.actor.user_id
        )
        await record_action(
            conn, ctx, tenant_id, "workspace.member.set", target_type="workspace",
            target_id=format_id("ws", workspace_id),
            details={"user": format_id("usr", user_id), "role": role},
        )  # fmt: skip
        return row


async def remove_member(
    ctx: Ctx, tenant_id: uuid.UUID, workspace_id: uuid.UUID, user_id: uuid.UUID
) -> None:
    async with tenant_scope(ctx, tenant_id) as (conn, _tenant):
        await require_tenant_admin(conn, ctx, tenant_id)
        await _live(conn, tenant_id, workspace_id)
        await _keep_an_admin(conn, tenant_id, workspace_id, user_id)
        if not await workspaces.remove_member(conn, tenant_id, workspace_id, user_id):
            raise NotFound(f"{format_id('usr', user_id)} is not a member of the workspace")
        await record_action(
            conn, ctx, tenant_id, "workspace.member.remove", target_type="workspace",
            target_id=format_id("ws", workspace_id), details={"user": format_id("usr", user_id)},
        )  # fmt: skip


async def update_workspace(
    ctx: Ctx, tenant_id: uuid.UUID, workspace_id: uuid.UUID, changes: dict[str, Any]
) -> Row:
    """``display_name``, ``description``, ``settings`` (slugs never change); AB-8002 for a
    workspace that does not exist or was deleted."""
    if "display_name" in changes:
        changes["display_name"] = check_text(changes["display_name"], "display_name")
    if "settings" in changes:
        changes["settings"] = check_settings(changes["settings"])
    if "description" in changes:
        changes["description"] = (
            check_text(changes["description"], "description", max_length=2000, required=False)
            or None
        )
    async with tenant_scope(ctx, tenant_id) as (conn, _tenant):
        await require_tenant_admin(conn, ctx, tenant_id)
        row = await workspaces.update_workspace(conn, tenant_id, workspace_id, changes)
        if row is None:
            raise NotFound(f"no workspace {format_id('ws', workspace_id)}")
        await record_action(
            conn, ctx, tenant_id, "workspace.update", target_type="workspace",
            target_id=format_id("ws", workspace_id), details={"changed": sorted(changes)},
        )  # fmt: skip
        return row


async def delete_workspace(ctx: Ctx, tenant_id: uuid.UUID, workspace_id: uuid.UUID) -> None:
    """Sets ``deleted_at``; AB-8008 while agents live in it (delete or move them first)."""
    async with tenant_scope(ctx, tenant_id) as (conn, _tenant):
        await require_tenant_admin(conn, ctx, tenant_id)
        row = await _live(conn, tenant_id, workspace_id)
        live = await workspaces.count_live_agents(conn, tenant_id, workspace_id)
        if live:
            raise StateConflict(f"the workspace still has {live} agents", agents=live)
        await workspaces.mark_deleted(conn, tenant_id, workspace_id)
        await record_action(
            conn, ctx, tenant_id, "workspace.delete", target_type="workspace",
            target_id=format_id("ws", workspace_id), details={"slug": row["slug"]},
        )  # fmt: skip
