"""Policy routes (04-API-SPEC §10.5), FastAPI routes in the OpenAPI document, for a tenant-wide
token with ``admin`` of a tenant owner or admin (as the other administration routes). After a
write the gateway drops its cached sets of the tenant."""

from __future__ import annotations

import uuid
from typing import Annotated, Any

from fastapi import APIRouter, Request
from pydantic import Field

from agentbus.errors import NotFound
from agentbus.gateway.api.admin import Caller
from agentbus.gateway.api.bodies import Body, read_model
from agentbus.gateway.api.views import ts
from agentbus.gateway.context import get_gateway
from agentbus.ids import InvalidId, format_id, parse_id
from agentbus.policies import actions
from agentbus.policies.model import DEFAULT_NAME, SCHEMA

router = APIRouter(tags=["policies"])
Row = dict[str, Any]


class NewPolicy(Body):
    name: str
    cedar: str
    workspace: str | None = None


class NewVersion(Body):
    cedar: str


class PolicyChange(Body):
    enabled: bool


class DryRun(Body):
    cedar: str
    name: str = "draft"
    workspace: str | None = None
    last: Annotated[int, Field(ge=1, le=actions.DRY_RUN_MAX)] = 100


def policy_view(row: Row) -> dict[str, Any]:
    ws = row["workspace_id"]
    view = {
        "id": format_id("pol", row["id"]),
        "name": row["name"],
        "workspace_id": None if ws is None else format_id("ws", ws),
        "version": row["version"],
        "enabled": row["enabled"],
        "cedar": row["cedar"],
        "created_by": format_id("usr", row["created_by"]),
        "created_at": ts(row["created_at"]),
    }
    if "versions" in row:
        view["versions"] = row["versions"]
    return view


def _path_id(text: str) -> uuid.UUID:
    try:
        return parse_id("pol", text)
    except InvalidId as exc:
        raise NotFound(f"no policy {text}") from exc


def _workspace(text: str | None) -> uuid.UUID | None:
    try:
        return None if text is None else parse_id("ws", text)
    except InvalidId as exc:
        raise NotFound(f"no workspace {text}") from exc


@router.get("/v1/policies/schema")
async def get_schema(who: Caller) -> dict[str, Any]:
    """The Cedar schema policies are validated against, and the default policy's name."""
    return {"schema": SCHEMA, "default_policy": DEFAULT_NAME}


@router.post("/v1/policies", status_code=201)
async def post_policy(request: Request, who: Caller) -> dict[str, Any]:
    """Version 1 of a new policy, enabled (AB-4003 when the Cedar text fails validation)."""
    body = await read_model(request, NewPolicy)
    row = await actions.create_policy(
        who.ctx, who.tenant_id, name=body.name, cedar=body.cedar,
        workspace_id=_workspace(body.workspace),
    )  # fmt: skip
    get_gateway(request).policy.invalidate(who.tenant_id)
    return policy_view(row)


@router.get("/v1/policies")
async def get_policies(who: Caller) -> dict[str, Any]:
    """The newest version of every policy, with how many versions each has."""
    return {"items": [policy_view(r) for r in await actions.list_policies(who.ctx, who.tenant_id)]}


@router.post("/v1/policies/dry-run")
async def post_dry_run(request: Request, who: Caller) -> dict[str, Any]:
    """Replays the last ``last`` messages against the policies with ``cedar`` as the next
    version of ``name``; lists what that set would refuse. Nothing is stored."""
    body = await read_model(request, DryRun)
    replayed, refused = await actions.dry_run(
        who.ctx, who.tenant_id, cedar=body.cedar, name=body.name,
        workspace_id=_workspace(body.workspace), last=body.last,
    )  # fmt: skip
    return {
        "replayed": replayed,
        "refused": [
            {
                "msg_id": format_id("msg", r.message["id"]),
                "type": r.message["type"],
                "from": format_id("agt", r.message["from_agent_id"]),
                "to": format_id("agt", r.message["to_agent_id"]),
                "accepted_at": ts(r.message["accepted_at"]),
                "action": r.action,
                "policy": r.decision.policy_name,
                "policy_id": None if r.decision.policy_id is None
                else format_id("pol", r.decision.policy_id),
                "reason": r.decision.reason,
            }
            for r in refused
        ],
    }  # fmt: skip


@router.get("/v1/policies/{policy_id}")
async def get_policy(policy_id: str, who: Caller) -> dict[str, Any]:
    """A policy version, and every version of its policy (oldest first)."""
    row, versions = await actions.get_policy(who.ctx, who.tenant_id, _path_id(policy_id))
    return policy_view(row) | {"history": [policy_view(v) for v in versions]}


@router.post("/v1/policies/{policy_id}/versions", status_code=201)
async def post_version(request: Request, policy_id: str, who: Caller) -> dict[str, Any]:
    """Version n+1 of the policy, enabled; the earlier versions are kept."""
    body = await read_model(request, NewVersion)
    row = await actions.add_version(who.ctx, who.tenant_id, _path_id(policy_id), body.cedar)
    get_gateway(request).policy.invalidate(who.tenant_id)
    return policy_view(row)


@router.patch("/v1/policies/{policy_id}")
async def patch_policy(request: Request, policy_id: str, who: Caller) -> dict[str, Any]:
    """Enable or disable the policy's newest version."""
    body = await read_model(request, PolicyChange)
    row = await actions.set_enabled(who.ctx, who.tenant_id, _path_id(policy_id), body.enabled)
    get_gateway(request).policy.invalidate(who.tenant_id)
    return policy_view(row)
