"""The inventory: hosts with their effective labels, manual labels, approving and forgetting
agents and hosts. Reads need ``inventory.read`` reaching the host, writes ``agent.manage``.

Any change of a host's labels re-renders its agents at once (through the render cache), so the
next config poll already sees the new desired artifact.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from uuid import UUID

from platformkit.db.scope import Conn
from platformkit.ids import uuid7

from strataplane import authz
from strataplane.actions import fleet_errors as fe
from strataplane.actions.access import TenantTx, tenant_tx
from strataplane.actions.context import Ctx
from strataplane.actions.fleet_desired import refresh_agents
from strataplane.domain.fleet_labels import LabelError, check_labels
from strataplane.store import fleet_agents, fleet_elastic, fleet_hosts, fleet_notify, fleet_zones
from strataplane.store.fleet_agents import Agent
from strataplane.store.fleet_hosts import Host


@dataclass(frozen=True)
class HostDetail:
    host: Host
    labels_by_source: list[dict[str, Any]]
    agents: list[Agent]


async def relabel_host(conn: Conn, tenant_id: UUID, host_id: UUID, agent_url: str) -> bool:
    """Recompute the host's zone labels and effective labels; re-render its agents when the
    effective labels changed. True when they changed."""
    before = await fleet_hosts.get_host(conn, tenant_id, host_id)
    address = await fleet_zones.zone_address(conn, tenant_id, host_id)
    zone = await fleet_zones.zone_labels(conn, tenant_id, address)
    try:
        zone_labels = check_labels(zone, "zone")
    except LabelError:
        zone_labels = {}  # zones are checked on write; an old bad zone labels nothing
    await fleet_hosts.replace_labels(conn, tenant_id, host_id, "zone", zone_labels)
    labels = await fleet_hosts.refresh_labels(conn, tenant_id, host_id)
    if before is None or labels == before.labels:
        return False
    agents = await fleet_agents.list_agents(conn, tenant_id, host_id=host_id)
    await refresh_agents(conn, tenant_id, [a.id for a in agents], agent_url)
    return True


def _target(host: Host) -> authz.Target:
    return authz.Target(hosts=(authz.Host(host.owner_team_id, host.labels),))


async def _host(tx: TenantTx, host_id: UUID, permission: str) -> Host:
    host = await fleet_hosts.get_host(tx.conn, tx.tenant_id, host_id)
    if host is None or not tx.decide(permission, _target(host)).allowed:
        if host is not None and tx.decide("inventory.read", _target(host)).allowed:
            tx.require(permission, _target(host))  # visible but not writable: 403
        raise fe.HostNotFound()
    tx.require(permission, _target(host))
    return host


async def list_hosts(ctx: Ctx, *, after: str | None = None, limit: int = 100) -> list[Host]:
    async with tenant_tx(ctx) as tx:
        found = await fleet_hosts.list_hosts(tx.conn, tx.tenant_id, after=after, limit=limit)
        return [h for h in found if tx.decide("inventory.read", _target(h)).allowed]


async def access_host(ctx: Ctx, host_id: UUID) -> HostDetail:
    async with tenant_tx(ctx) as tx:
        host = await _host(tx, host_id, "inventory.read")
        by_source = await fleet_hosts.labels_by_source(tx.conn, tx.tenant_id, host_id)
        agents = await fleet_agents.list_agents(tx.conn, tx.tenant_id, host_id=host_id)
        return HostDetail(host, by_source, agents)


async def set_manual_labels(
    ctx: Ctx, host_id: UUID, labels: dict[str, Any], *, agent_url: str
) -> Host:
    """The host's manual labels become exactly ``labels`` (they outrank every other source)."""
    try:
        checked = check_labels(labels, "manual")
    except LabelError as exc:
        raise fe.InvalidLabels(str(exc), field=f"labels.{exc.key}") from None
    async with tenant_tx(ctx) as tx:
        await _host(tx, host_id, "agent.manage")
        await fleet_hosts.replace_labels(tx.conn, tx.tenant_id, host_id, "manual", checked)
        await relabel_host(tx.conn, tx.tenant_id, host_id, agent_url)
        await tx.audit("host.label", "host", host_id, {"manual": checked})
        host = await fleet_hosts.get_host(tx.conn, tx.tenant_id, host_id)
    assert host is not None
    return host


async def forget_host(ctx: Ctx, host_id: UUID) -> None:
    """Delete the host, its agents and their credentials (audit keeps the ids)."""
    async with tenant_tx(ctx) as tx:
        host = await _host(tx, host_id, "agent.manage")
        for agent in await fleet_agents.list_agents(tx.conn, tx.tenant_id, host_id=host_id):
            revoked = await fleet_agents.revoke_credentials(tx.conn, tx.tenant_id, agent.id)
            await fleet_notify.credentials_revoked(tx.conn, revoked)
            await fleet_notify.agent_changed(tx.conn, tx.tenant_id, agent.id)
        await fleet_hosts.delete_host(tx.conn, tx.tenant_id, host_id)
        await tx.audit("host.forget", "host", host_id, {"name": host.name})


async def _agent(tx: TenantTx, agent_id: UUID, permission: str) -> Agent:
    agent = await fleet_agents.get_agent(tx.conn, tx.tenant_id, agent_id)
    if agent is None:
        raise fe.AgentNotFound()
    try:
        await _host(tx, agent.host_id, permission)
    except fe.HostNotFound:
        raise fe.AgentNotFound() from None
    return agent


async def list_agents(
    ctx: Ctx, where: fleet_agents.AgentFilter, *, after: UUID | None = None, limit: int = 100
) -> tuple[list[Agent], UUID | None]:
    """The agents matching ``where`` that the caller may read, by id, and the cursor of the
    next page (None on the last one)."""
    async with tenant_tx(ctx) as tx:
        rows = await fleet_agents.search_agents(
            tx.conn, tx.tenant_id, where, after=after, limit=limit
        )
        visible = [
            agent
            for agent, owner, labels in rows
            if tx.decide("inventory.read", authz.Target(hosts=(authz.Host(owner, labels),))).allowed
        ]
    return visible, rows[-1][0].id if len(rows) == limit else None


async def access_agent(ctx: Ctx, agent_id: UUID) -> Agent:
    async with tenant_tx(ctx) as tx:
        return await _agent(tx, agent_id, "inventory.read")


async def forget_agent(ctx: Ctx, agent_id: UUID) -> None:
    """Delete the agent and revoke its credential; a host left without agents, manual labels
    and owner is forgotten with it."""
    async with tenant_tx(ctx) as tx:
        agent = await _agent(tx, agent_id, "agent.manage")
        revoked = await fleet_agents.revoke_credentials(tx.conn, tx.tenant_id, agent_id)
        await fleet_notify.credentials_revoked(tx.conn, revoked)
        await fleet_notify.agent_changed(tx.conn, tx.tenant_id, agent_id)
        await fleet_agents.delete_agent(tx.conn, tx.tenant_id, agent_id)
        await tx.audit("agent.forget", "agent_instance", agent_id, {"host": str(agent.host_id)})
        detail = await fleet_hosts.get_host(tx.conn, tx.tenant_id, agent.host_id)
        rest = await fleet_agents.list_agents(tx.conn, tx.tenant_id, host_id=agent.host_id)
        sources = await fleet_hosts.labels_by_source(tx.conn, tx.tenant_id, agent.host_id)
        manual = any(r["source"] == "manual" for r in sources)
        if detail is not None and not rest and not manual and detail.owner_team_id is None:
            await fleet_hosts.delete_host(tx.conn, tx.tenant_id, agent.host_id)
            await tx.audit("host.forget", "host", agent.host_id, {"name": detail.name})


async def unenroll_agent(ctx: Ctx, agent_id: UUID) -> Agent:
    """Queue an UNENROLL action for an Elastic Agent: delivered at its next check-in; its
    acknowledgement revokes the agent's key (agents/elastic-agent.md §5)."""
    async with tenant_tx(ctx) as tx:
        agent = await _agent(tx, agent_id, "agent.manage")
        if agent.kind != "elastic-agent":
            raise fe.UnenrollUnsupported("only Elastic Agents take an UNENROLL action")
        await fleet_elastic.add_action(
            tx.conn, tx.tenant_id, agent_id, uuid7(), "UNENROLL", {}, ctx.user_id
        )
        await fleet_notify.agent_changed(tx.conn, tx.tenant_id, agent_id)
        await tx.audit("agent.unenroll", "agent_instance", agent_id)
    return agent


async def change_agent_settings(ctx: Ctx, agent_id: UUID, log_level: str) -> Agent:
    """Queue a SETTINGS action (the agent's log level) for an Elastic Agent; an older one not
    yet acknowledged is superseded (agents/elastic-agent.md §5)."""
    async with tenant_tx(ctx) as tx:
        agent = await _agent(tx, agent_id, "agent.manage")
        if agent.kind != "elastic-agent":
            raise fe.SettingsUnsupported("only Elastic Agents take a SETTINGS action")
        action_id = uuid7()
        data = {"log_level": log_level}
        await fleet_elastic.add_action(
            tx.conn, tx.tenant_id, agent_id, action_id, "SETTINGS", data, ctx.user_id
        )
        await fleet_elastic.supersede_pending(
            tx.conn, tx.tenant_id, agent_id, "SETTINGS", action_id
        )
        await fleet_notify.agent_changed(tx.conn, tx.tenant_id, agent_id)
        await tx.audit("agent.settings", "agent_instance", agent_id, data)
    return agent


async def approve_agent(ctx: Ctx, agent_id: UUID) -> Agent:
    async with tenant_tx(ctx) as tx:
        await _agent(tx, agent_id, "agent.manage")
        await fleet_agents.approve(tx.conn, tx.tenant_id, agent_id)
        await fleet_notify.agent_changed(tx.conn, tx.tenant_id, agent_id)
        await tx.audit("agent.approve", "agent_instance", agent_id)
        agent = await fleet_agents.get_agent(tx.conn, tx.tenant_id, agent_id)
    assert agent is not None
    return agent
