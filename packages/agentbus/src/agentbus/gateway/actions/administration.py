"""Administration over the API (04-API-SPEC §10): the tenant, its workspaces, users and
integration tokens, for an integration token with ``admin``.

The acting user is the token's owner, so the actions of ``agentbus.actions`` apply their role
rules (tenant owner or admin for writes and for users and tokens, AB-1008) and write their audit
rows exactly as for the admin CLI's operator. The token must be tenant-wide (AB-1015): these
resources span workspaces. A new token's scopes must be among the caller's own (AB-1007), so a
token never mints a stronger one.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any, Literal

from pydantic import Field

from agentbus.actions import tenants, tokens, users, workspaces
from agentbus.actions.context import Actor, Ctx
from agentbus.actions.validate import settings_problem
from agentbus.errors import InsufficientScope, NotFound, RequestInvalid
from agentbus.gateway.api.auth import require_tenant_wide
from agentbus.gateway.api.bodies import Body
from agentbus.gateway.api.views import ts
from agentbus.gateway.context import Gateway
from agentbus.gateway.domain.wire import parse_ts
from agentbus.ids import InvalidId, format_id, parse_id
from agentbus.store.integration_tokens import DEFAULT_SCOPES, SCOPES, VerifiedToken

Row = dict[str, Any]


class NewToken(Body):
    name: str = Field(min_length=1, max_length=200)
    env: Literal["live", "test"] = "live"
    workspace: str | None = None
    owner: str | None = None
    scopes: list[str] = Field(default_factory=lambda: list(DEFAULT_SCOPES), min_length=1)
    expires_at: str | None = None


class Revocation(Body):
    reason: str | None = Field(None, max_length=500)


class NewWorkspace(Body):
    slug: str
    display_name: str
    description: str | None = None


class WorkspaceChange(Body):
    display_name: str | None = None
    description: str | None = None
    settings: dict[str, Any] | None = None


class TenantChange(Body):
    display_name: str | None = None
    settings: dict[str, Any] | None = None
    retention_days: int | None = None


class Membership(Body):
    role: Literal["admin", "member", "viewer"]


class UserChange(Body):
    status: Literal["active", "disabled"] | None = None
    tenant_role: Literal["owner", "admin", "member", "auditor", "billing"] | None = None


def acting(gw: Gateway, token: VerifiedToken, client: tuple[str | None, str | None]) -> Ctx:
    """The action context of an administration call; AB-1007 without ``admin``, AB-1015 for a
    token bound to a workspace."""
    require_tenant_wide(token, ("admin",), "administration")
    return Ctx(gw.pool, Actor.user(token.tenant_id, token.owner_user_id), keyring=gw.keyring,
               ip=client[0], user_agent=client[1])  # fmt: skip


def _id(prefix: str, text: str, field: str) -> uuid.UUID:
    try:
        return parse_id(prefix, text)
    except InvalidId as exc:
        raise RequestInvalid(f"{field} takes a {prefix}_ id", field=field) from exc


def _path_id(prefix: str, text: str) -> uuid.UUID:
    """An id from a path: anything else is AB-8002, as for what does not exist."""
    try:
        return parse_id(prefix, text)
    except InvalidId as exc:
        raise NotFound(f"no {prefix}_ {text}") from exc


def token_view(row: Row) -> dict[str, Any]:
    """A token as listed: never its hash or plaintext."""
    workspace_id = row["workspace_id"]
    return {
        "id": format_id("tok", row["id"]),
        "name": row["name"],
        "env": row["env"],
        "workspace_id": None if workspace_id is None else format_id("ws", workspace_id),
        "owner_user_id": format_id("usr", row["owner_user_id"]),
        "scopes": list(row["scopes"]),
        "prefix": row["prefix"],
        "last4": row["last4"],
        "expires_at": ts(row["expires_at"]),
        "last_used_at": ts(row["last_used_at"]),
        "last_used_ip": row["last_used_ip"],
        "revoked_at": ts(row["revoked_at"]),
        "revoked_reason": row["revoked_reason"],
        "created_at": ts(row["created_at"]),
    }


def settings_view(settings: Any) -> dict[str, Any]:
    """``settings`` as stored; settings stored before they were bounded (``check_settings``)
    and past the bound read as ``{}`` with ``settings_unreadable`` saying why, so the row stays
    readable and a PATCH of ``settings`` replaces them."""
    problem = settings_problem(settings)
    if problem is None:
        return {"settings": settings}
    return {
        "settings": {},
        "settings_unreadable": f"the stored settings are past the bound (settings {problem}); "
        "PATCH settings to replace them",
    }


def workspace_view(row: Row) -> dict[str, Any]:
    return {
        "id": format_id("ws", row["id"]),
        "slug": row["slug"],
        "display_name": row["display_name"],
        "description": row["description"],
        **settings_view(row["settings"]),
        "created_at": ts(row["created_at"]),
    }


def member_view(row: Row) -> dict[str, Any]:
    invited_by = row["invited_by"]
    return {
        "user_id": format_id("usr", row["user_id"]),
        "role": row["role"],
        "invited_by": None if invited_by is None else format_id("usr", invited_by),
        "created_at": ts(row["created_at"]),
    }


def user_view(row: Row) -> dict[str, Any]:
    return {
        "id": format_id("usr", row["id"]),
        "email": row["email"],
        "display_name": row["display_name"],
        "idp": row["idp"],
        "status": row["status"],
        "tenant_role": row.get("tenant_role"),
        "created_at": ts(row["created_at"]),
        "last_login_at": ts(row.get("last_login_at")),
    }


def tenant_view(row: Row) -> dict[str, Any]:
    return {
        "id": format_id("ten", row["id"]),
        "slug": row["slug"],
        "display_name": row["display_name"],
        "plan": row["plan"],
        "status": row["status"],
        "region": row["region"],
        "retention_days": row["retention_days"],
        "custom_domain": row["custom_domain"],
        **settings_view(row["settings"]),
        "created_at": ts(row["created_at"]),
    }


async def create_token(ctx: Ctx, caller: VerifiedToken, body: NewToken) -> dict[str, Any]:
    stronger = (set(body.scopes) & set(SCOPES)) - caller.scopes  # unknown ones: AB-8001 below
    if stronger:
        raise InsufficientScope(
            f"a new token's scopes must be among yours; not {', '.join(sorted(stronger))}",
            scope=sorted(stronger)[0],
        )
    expires_at: datetime | None = None
    if body.expires_at is not None:
        try:
            expires_at = parse_ts(body.expires_at)
        except ValueError as exc:
            raise RequestInvalid("expires_at takes an RFC 3339 time", field="expires_at") from exc
    issued = await tokens.create_integration_token(
        ctx, caller.tenant_id,
        owner_user_id=caller.owner_user_id if body.owner is None
        else _id("usr", body.owner, "owner"),
        name=body.name, env=body.env, scopes=body.scopes, expires_at=expires_at,
        workspace_id=None if body.workspace is None else _id("ws", body.workspace, "workspace"),
    )  # fmt: skip
    return {**token_view(issued.row), "token": issued.plaintext}


async def list_tokens(
    ctx: Ctx, tenant_id: uuid.UUID, owner: str | None, include_revoked: bool
) -> list[dict[str, Any]]:
    rows = await tokens.list_integration_tokens(
        ctx, tenant_id, include_revoked=include_revoked,
        owner_user_id=None if owner is None else _id("usr", owner, "owner"),
    )  # fmt: skip
    return [token_view(row) for row in rows]


async def read_token(ctx: Ctx, tenant_id: uuid.UUID, token_ref: str) -> dict[str, Any]:
    row = await tokens.get_integration_token(ctx, tenant_id, _path_id("tok", token_ref))
    return token_view(row)


async def revoke_token(
    ctx: Ctx, tenant_id: uuid.UUID, token_ref: str, reason: str | None
) -> dict[str, Any]:
    row = await tokens.revoke_integration_token(
        ctx, tenant_id, _path_id("tok", token_ref), reason=reason
    )
    return token_view(row)


async def create_workspace(ctx: Ctx, tenant_id: uuid.UUID, body: NewWorkspace) -> dict[str, Any]:
    row = await workspaces.create_workspace(
        ctx, tenant_id, slug=body.slug, display_name=body.display_name,
        description=body.description,
    )  # fmt: skip
    return workspace_view(row)


async def list_workspaces(ctx: Ctx, tenant_id: uuid.UUID) -> list[dict[str, Any]]:
    return [workspace_view(row) for row in await workspaces.list_workspaces(ctx, tenant_id)]


async def read_workspace(ctx: Ctx, tenant_id: uuid.UUID, ws_ref: str) -> dict[str, Any]:
    return workspace_view(await workspaces.get_workspace(ctx, tenant_id, _path_id("ws", ws_ref)))


async def change_workspace(
    ctx: Ctx, tenant_id: uuid.UUID, ws_ref: str, body: WorkspaceChange
) -> dict[str, Any]:
    changes = body.model_dump(exclude_unset=True)
    for name in ("display_name", "settings"):
        if name in changes and changes[name] is None:
            raise RequestInvalid(f"{name} cannot be null", field=name)
    row = await workspaces.update_workspace(ctx, tenant_id, _path_id("ws", ws_ref), changes)
    return workspace_view(row)


async def delete_workspace(ctx: Ctx, tenant_id: uuid.UUID, ws_ref: str) -> None:
    await workspaces.delete_workspace(ctx, tenant_id, _path_id("ws", ws_ref))


async def list_members(ctx: Ctx, tenant_id: uuid.UUID, ws_ref: str) -> list[dict[str, Any]]:
    rows = await workspaces.list_members(ctx, tenant_id, _path_id("ws", ws_ref))
    return [member_view(row) for row in rows]


async def set_member(
    ctx: Ctx, tenant_id: uuid.UUID, ws_ref: str, user_ref: str, body: Membership
) -> dict[str, Any]:
    row = await workspaces.set_member(
        ctx, tenant_id, _path_id("ws", ws_ref), _path_id("usr", user_ref), body.role
    )
    return member_view(row)


async def remove_member(ctx: Ctx, tenant_id: uuid.UUID, ws_ref: str, user_ref: str) -> None:
    await workspaces.remove_member(
        ctx, tenant_id, _path_id("ws", ws_ref), _path_id("usr", user_ref)
    )


async def list_users(ctx: Ctx, tenant_id: uuid.UUID) -> list[dict[str, Any]]:
    return [user_view(row) for row in await users.list_users(ctx, tenant_id)]


async def read_user(ctx: Ctx, tenant_id: uuid.UUID, user_ref: str) -> dict[str, Any]:
    return user_view(await users.get_user(ctx, tenant_id, _path_id("usr", user_ref)))


async def change_user(
    ctx: Ctx, tenant_id: uuid.UUID, user_ref: str, body: UserChange
) -> dict[str, Any]:
    row, in_force = await users.change_user(
        ctx, tenant_id, _path_id("usr", user_ref), status=body.status,
        tenant_role=body.tenant_role,
    )  # fmt: skip
    return {**user_view(row), "active_tokens": [format_id("tok", t["id"]) for t in in_force]}


def own_tenant(tenant_id: uuid.UUID, tenant_ref: str) -> None:
    """A tenant route names the caller's own tenant; any other id is AB-8002."""
    if _path_id("ten", tenant_ref) != tenant_id:
        raise NotFound(f"no tenant {tenant_ref}")


async def read_tenant(ctx: Ctx, tenant_id: uuid.UUID, tenant_ref: str) -> dict[str, Any]:
    own_tenant(tenant_id, tenant_ref)
    row, limits = await tenants.read_tenant(ctx, tenant_id)
    return {**tenant_view(row), "limits": limits}


async def change_tenant(
    ctx: Ctx, gw: Gateway, tenant_id: uuid.UUID, tenant_ref: str, body: TenantChange
) -> dict[str, Any]:
    """A new retention reaches the tenant's stream after the commit."""
    own_tenant(tenant_id, tenant_ref)
    changes = body.model_dump(exclude_unset=True)
    for name, value in changes.items():
        if value is None:
            raise RequestInvalid(f"{name} cannot be null", field=name)
    row = await tenants.update_tenant(ctx, tenant_id, changes)
    if "retention_days" in changes:
        await gw.broker.set_retention(tenant_id, row["retention_days"])
    _row, limits = await tenants.read_tenant(ctx, tenant_id)
    return {**tenant_view(row), "limits": limits}
