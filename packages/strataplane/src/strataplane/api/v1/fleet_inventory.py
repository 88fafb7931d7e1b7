"""The inventory: hosts with effective labels, agents with desired / served / applied, health
and sync, network zones, and explain."""

from __future__ import annotations

import re
from dataclasses import fields
from datetime import datetime
from typing import Annotated, Any, Literal
from uuid import UUID

from fastapi import APIRouter, Query, Request, Response
from pydantic import Field

from strataplane import errors
from strataplane.actions import fleet_explain, fleet_inventory, fleet_zones
from strataplane.api.deps import TenantCtx
from strataplane.api.v1.common import Model, Page, PageLimit, page
from strataplane.api.v1.fleet_enrollment import fleet_settings
from strataplane.store.fleet_agents import Agent, AgentFilter

router = APIRouter(tags=["fleet"])


class HostOut(Model):
    id: UUID
    name: str
    kind: str
    owner_team_id: UUID | None
    labels: dict[str, str] = Field(description="Effective labels, built-ins included.")
    first_seen_at: datetime
    updated_at: datetime


class AgentOut(Model):
    id: UUID
    host_id: UUID
    kind: str
    external_id: str
    version: str | None
    version_raw: str | None
    enrolled_at: datetime
    approved_at: datetime | None
    health: str
    health_message: str | None
    sync: str
    sync_reason: str | None
    flags: list[str]
    desired_revision_id: int | None
    desired_since: datetime | None
    served_at: datetime | None
    applied_revision_id: int | None
    applied_at: datetime | None
    last_seen_at: datetime | None
    last_source_ip: str | None
    desired_artifact: str | None = None
    served_artifact: str | None = None
    applied_artifact: str | None = None

    @classmethod
    def of(cls, agent: Agent) -> AgentOut:
        data = {f.name: getattr(agent, f.name) for f in fields(agent)}
        for name in ("desired_artifact", "served_artifact", "applied_artifact"):
            data[name] = data[name].hex() if data[name] is not None else None
        return cls.model_validate(data)


class HostDetailOut(HostOut):
    labels_by_source: list[dict[str, Any]]
    agents: list[AgentOut]


class LabelsIn(Model):
    labels: dict[str, Any] = Field(description="The host's manual labels, replaced whole.")


class ZoneIn(Model):
    cidr: str
    labels: dict[str, Any]


class ZoneOut(Model):
    id: UUID
    cidr: str
    labels: dict[str, str]


@router.get("/hosts")
async def list_hosts(
    ctx: TenantCtx, after: str | None = None, limit: PageLimit = 100
) -> Page[HostOut]:
    found = await fleet_inventory.list_hosts(ctx, after=after, limit=limit)
    items = [HostOut.model_validate(h) for h in found]
    return Page[HostOut].model_validate(page(items, limit, lambda h: h.name))


@router.get("/hosts/{host_id}")
async def get_host(ctx: TenantCtx, host_id: UUID) -> HostDetailOut:
    d = await fleet_inventory.access_host(ctx, host_id)
    base = HostOut.model_validate(d.host).model_dump()
    return HostDetailOut(
        **base, labels_by_source=d.labels_by_source, agents=[AgentOut.of(a) for a in d.agents]
    )


@router.put("/hosts/{host_id}/labels")
async def set_labels(ctx: TenantCtx, host_id: UUID, body: LabelsIn, request: Request) -> HostOut:
    agent_url = fleet_settings(request).agent_url
    host = await fleet_inventory.set_manual_labels(ctx, host_id, body.labels, agent_url=agent_url)
    return HostOut.model_validate(host)


@router.delete("/hosts/{host_id}", status_code=204)
async def forget_host(ctx: TenantCtx, host_id: UUID) -> Response:
    await fleet_inventory.forget_host(ctx, host_id)
    return Response(status_code=204)


AgentKind = Literal["telegraf", "elastic-agent", "strataplane-agent", "vector"]
Health = Literal["pending", "healthy", "degraded", "failed", "not_reporting"]
Sync = Literal["in_sync", "updating", "out_of_sync", "render_error"]
_LABEL = re.compile(r"^([a-z0-9][a-z0-9._/-]{0,252})=(.{0,253})$", re.S)


def parse_labels(given: list[str]) -> dict[str, str]:
    """``key=value`` items as a mapping (the agents list's and the console's label filter)."""
    out = {}
    for item in given:
        m = _LABEL.match(item)
        if m is None:
            raise errors.InvalidInput("a label is key=value", field="label")
        out[m.group(1)] = m.group(2)
    return out


@router.get("/agents")
async def list_agents(
    ctx: TenantCtx,
    kind: AgentKind | None = None,
    health: Health | None = None,
    sync: Sync | None = None,
    version: Annotated[str | None, Query(max_length=64)] = None,
    host_id: UUID | None = None,
    label: Annotated[
        list[str],
        Query(max_length=20, description="key=value: the host's effective label (repeat: all)."),
    ] = [],  # noqa: B006 - FastAPI copies defaults
    after: UUID | None = None,
    limit: PageLimit = 100,
) -> Page[AgentOut]:
    """Agents the caller may read, by id, filtered by kind, health, sync, version, host and
    the host's labels."""
    where = AgentFilter(kind, health, sync, version, host_id, parse_labels(label))
    found, cursor = await fleet_inventory.list_agents(ctx, where, after=after, limit=limit)
    items = [AgentOut.of(a) for a in found]
    return Page[AgentOut](items=items, next=str(cursor) if cursor else None)


@router.get("/agents/{agent_id}")
async def get_agent(ctx: TenantCtx, agent_id: UUID) -> AgentOut:
    return AgentOut.of(await fleet_inventory.access_agent(ctx, agent_id))


@router.post("/agents/{agent_id}/approve")
async def approve_agent(ctx: TenantCtx, agent_id: UUID) -> AgentOut:
    return AgentOut.of(await fleet_inventory.approve_agent(ctx, agent_id))


@router.post("/agents/{agent_id}/unenroll")
async def unenroll_agent(ctx: TenantCtx, agent_id: UUID) -> AgentOut:
    """Elastic Agent: queue an UNENROLL action; its acknowledgement revokes the agent's key."""
    return AgentOut.of(await fleet_inventory.unenroll_agent(ctx, agent_id))


class AgentSettingsIn(Model):
    log_level: Literal["trace", "debug", "info", "warning", "error"] = Field(
        description="The Elastic Agent's log level (Fleet's SETTINGS action)."
    )


@router.post("/agents/{agent_id}/settings")
async def change_agent_settings(ctx: TenantCtx, agent_id: UUID, body: AgentSettingsIn) -> AgentOut:
    """Elastic Agent: queue a SETTINGS action setting the agent's log level."""
    return AgentOut.of(await fleet_inventory.change_agent_settings(ctx, agent_id, body.log_level))


@router.delete("/agents/{agent_id}", status_code=204)
async def forget_agent(ctx: TenantCtx, agent_id: UUID) -> Response:
    await fleet_inventory.forget_agent(ctx, agent_id)
    return Response(status_code=204)


@router.get("/agents/{agent_id}/explain")
async def explain_agent(ctx: TenantCtx, agent_id: UUID, request: Request) -> dict[str, Any]:
    agent_url = fleet_settings(request).agent_url
    return await fleet_explain.explain_agent(ctx, agent_id, agent_url=agent_url)


@router.get("/network-zones")
async def list_zones(ctx: TenantCtx) -> list[ZoneOut]:
    return [ZoneOut.model_validate(z) for z in await fleet_zones.list_zones(ctx)]


@router.post("/network-zones", status_code=201)
async def create_zone(ctx: TenantCtx, body: ZoneIn, request: Request) -> ZoneOut:
    agent_url = fleet_settings(request).agent_url
    zone = await fleet_zones.create_zone(ctx, body.cidr, body.labels, agent_url=agent_url)
    return ZoneOut.model_validate(zone)


@router.delete("/network-zones/{zone_id}", status_code=204)
async def delete_zone(ctx: TenantCtx, zone_id: UUID, request: Request) -> Response:
    await fleet_zones.delete_zone(ctx, zone_id, agent_url=fleet_settings(request).agent_url)
    return Response(status_code=204)
