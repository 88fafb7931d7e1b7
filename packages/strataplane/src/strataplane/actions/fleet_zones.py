"""Network zones: CIDR -> labels (source 'zone'), a tenant setting (permission tenant.admin).
Creating or deleting a zone relabels every host with agents and re-renders what changed."""

from __future__ import annotations

import ipaddress
from typing import Any
from uuid import UUID

import psycopg
from platformkit.ids import uuid7

from strataplane.actions import fleet_errors as fe
from strataplane.actions.access import TenantTx, tenant_tx
from strataplane.actions.context import Ctx
from strataplane.actions.fleet_enrollment import labels_or_422
from strataplane.actions.fleet_inventory import relabel_host
from strataplane.store import fleet_zones
from strataplane.store.fleet_zones import Zone


async def _relabel_all(tx: TenantTx, agent_url: str) -> None:
    for host_id in await fleet_zones.hosts_with_agents(tx.conn, tx.tenant_id):
        await relabel_host(tx.conn, tx.tenant_id, host_id, agent_url)


async def create_zone(ctx: Ctx, cidr: str, labels: dict[str, Any], *, agent_url: str) -> Zone:
    try:
        network = str(ipaddress.ip_network(cidr, strict=True))
    except ValueError as exc:
        raise fe.InvalidLabels(f"not a CIDR: {exc}", field="cidr") from None
    checked = labels_or_422(labels, "zone")
    async with tenant_tx(ctx) as tx:
        tx.require("tenant.admin")
        try:
            async with tx.conn.transaction():
                zone = await fleet_zones.insert_zone(
                    tx.conn, tx.tenant_id, uuid7(), network, checked
                )
        except psycopg.errors.UniqueViolation:
            raise fe.ZoneExists(field="cidr") from None
        await _relabel_all(tx, agent_url)
        await tx.audit("network_zone.create", "network_zone", zone.id, {"cidr": network})
    return zone


async def list_zones(ctx: Ctx) -> list[Zone]:
    async with tenant_tx(ctx) as tx:
        tx.require("spec.read")
        return await fleet_zones.list_zones(tx.conn, tx.tenant_id)


async def delete_zone(ctx: Ctx, zone_id: UUID, *, agent_url: str) -> None:
    async with tenant_tx(ctx) as tx:
        tx.require("tenant.admin")
        zone = await fleet_zones.delete_zone(tx.conn, tx.tenant_id, zone_id)
        if zone is None:
            raise fe.ZoneNotFound()
        await _relabel_all(tx, agent_url)
        await tx.audit("network_zone.delete", "network_zone", zone_id, {"cidr": zone.cidr})
