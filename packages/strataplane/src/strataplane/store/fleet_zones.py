"""network_zone: CIDR -> labels (source 'zone'). A source address matches the zone with the
longest prefix among its tenant's zones; a host's zone labels come from the last source address
of its oldest agent instance."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from uuid import UUID

from platformkit.db.scope import Conn
from psycopg.types.json import Jsonb

from strataplane.store.rows import maybe, one


@dataclass(frozen=True)
class Zone:
    id: UUID
    tenant_id: UUID
    cidr: str
    labels: dict[str, str]


_COLUMNS = "id, tenant_id, cidr::text AS cidr, labels"


async def insert_zone(
    conn: Conn, tenant_id: UUID, zone_id: UUID, cidr: str, labels: dict[str, str]
) -> Zone:
    cur = await conn.execute(
        f"INSERT INTO network_zone (id, tenant_id, cidr, labels) VALUES (%s, %s, %s, %s) "
        f"RETURNING {_COLUMNS}",
        (zone_id, tenant_id, cidr, Jsonb(labels)),
    )
    return Zone(**await one(cur))


async def list_zones(conn: Conn, tenant_id: UUID) -> list[Zone]:
    cur = await conn.execute(
        f"SELECT {_COLUMNS} FROM network_zone WHERE tenant_id = %s ORDER BY cidr", (tenant_id,)
    )
    return [Zone(**r) for r in await cur.fetchall()]


async def delete_zone(conn: Conn, tenant_id: UUID, zone_id: UUID) -> Zone | None:
    cur = await conn.execute(
        f"DELETE FROM network_zone WHERE tenant_id = %s AND id = %s RETURNING {_COLUMNS}",
        (tenant_id, zone_id),
    )
    row = await maybe(cur)
    return Zone(**row) if row is not None else None


async def zone_labels(conn: Conn, tenant_id: UUID, address: str | None) -> dict[str, Any]:
    """The labels of the longest-prefix zone containing ``address`` ({} when none)."""
    if address is None:
        return {}
    cur = await conn.execute(
        "SELECT labels FROM network_zone WHERE tenant_id = %s AND cidr >>= %s::inet "
        "ORDER BY masklen(cidr) DESC LIMIT 1",
        (tenant_id, address),
    )
    row = await cur.fetchone()
    return dict(row["labels"]) if row is not None else {}


async def zone_address(conn: Conn, tenant_id: UUID, host_id: UUID) -> str | None:
    """The last source address of the host's oldest agent instance."""
    cur = await conn.execute(
        "SELECT host(last_source_ip) AS ip FROM agent_instance WHERE tenant_id = %s "
        "AND host_id = %s ORDER BY enrolled_at, id LIMIT 1",
        (tenant_id, host_id),
    )
    row = await cur.fetchone()
    return str(row["ip"]) if row is not None and row["ip"] is not None else None


async def hosts_with_agents(conn: Conn, tenant_id: UUID) -> list[UUID]:
    cur = await conn.execute(
        "SELECT DISTINCT host_id FROM agent_instance WHERE tenant_id = %s", (tenant_id,)
    )
    return [r["host_id"] for r in await cur.fetchall()]


async def has_zones(conn: Conn, tenant_id: UUID) -> bool:
    cur = await conn.execute(
        "SELECT 1 FROM network_zone WHERE tenant_id = %s LIMIT 1", (tenant_id,)
    )
    return await cur.fetchone() is not None
