"""host, host_label and network_zone: the inventory's hosts, their labels by source and the
zones that label them. ``host.labels`` holds the effective labels, rewritten by
``refresh_labels`` whenever a source, the owner or a zone changes."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

from platformkit.db.scope import Conn
from platformkit.ids import uuid7
from psycopg.types.json import Jsonb

from strataplane.domain.fleet_labels import effective_labels
from strataplane.store.rows import maybe

_COLUMNS = (
    "id, tenant_id, name, kind::text AS kind, owner_team_id, labels, first_seen_at, updated_at"
)


@dataclass(frozen=True)
class Host:
    id: UUID
    tenant_id: UUID
    name: str
    kind: str
    owner_team_id: UUID | None
    labels: dict[str, str]
    first_seen_at: datetime
    updated_at: datetime


async def ensure_host(conn: Conn, tenant_id: UUID, name: str, kind: str) -> Host:
    """The host of this name, created when new (a second agent on a host shares it)."""
    await conn.execute(
        "INSERT INTO host (id, tenant_id, name, kind) VALUES (%s, %s, %s, %s) "
        "ON CONFLICT (tenant_id, name) DO NOTHING",
        (uuid7(), tenant_id, name, kind),
    )
    cur = await conn.execute(
        f"SELECT {_COLUMNS} FROM host WHERE tenant_id = %s AND name = %s", (tenant_id, name)
    )
    row = await maybe(cur)
    assert row is not None
    return Host(**row)


async def get_host(conn: Conn, tenant_id: UUID, host_id: UUID) -> Host | None:
    cur = await conn.execute(
        f"SELECT {_COLUMNS} FROM host WHERE tenant_id = %s AND id = %s", (tenant_id, host_id)
    )
    row = await maybe(cur)
    return Host(**row) if row is not None else None


async def list_hosts(conn: Conn, tenant_id: UUID, *, after: str | None, limit: int) -> list[Host]:
    cur = await conn.execute(
        f"SELECT {_COLUMNS} FROM host WHERE tenant_id = %s AND (%s::text IS NULL OR name > %s) "
        "ORDER BY name LIMIT %s",
        (tenant_id, after, after, limit),
    )
    return [Host(**r) for r in await cur.fetchall()]


async def delete_host(conn: Conn, tenant_id: UUID, host_id: UUID) -> None:
    await conn.execute("DELETE FROM host WHERE tenant_id = %s AND id = %s", (tenant_id, host_id))


async def labels_by_source(conn: Conn, tenant_id: UUID, host_id: UUID) -> list[dict[str, Any]]:
    cur = await conn.execute(
        "SELECT source::text AS source, key, value, updated_at FROM host_label "
        "WHERE tenant_id = %s AND host_id = %s ORDER BY key, source",
        (tenant_id, host_id),
    )
    return list(await cur.fetchall())


async def replace_labels(
    conn: Conn, tenant_id: UUID, host_id: UUID, source: str, labels: dict[str, str]
) -> None:
    """The host's labels from ``source`` become exactly ``labels``."""
    await conn.execute(
        "DELETE FROM host_label WHERE tenant_id = %s AND host_id = %s AND source = %s "
        "AND NOT (key = ANY(%s))",
        (tenant_id, host_id, source, list(labels)),
    )
    for key, value in labels.items():
        await conn.execute(
            "INSERT INTO host_label (tenant_id, host_id, source, key, value) "
            "VALUES (%s, %s, %s, %s, %s) ON CONFLICT (host_id, source, key) DO UPDATE "
            "SET value = excluded.value, updated_at = now() "
            "WHERE host_label.value <> excluded.value",
            (tenant_id, host_id, source, key, value),
        )


async def refresh_labels(conn: Conn, tenant_id: UUID, host_id: UUID) -> dict[str, str] | None:
    """Recompute ``host.labels``; the effective labels, or None for an unknown host."""
    cur = await conn.execute(
        "SELECT h.name, h.kind::text AS kind, t.slug AS owner FROM host h "
        "LEFT JOIN team t ON t.tenant_id = h.tenant_id AND t.id = h.owner_team_id "
        "WHERE h.tenant_id = %s AND h.id = %s",
        (tenant_id, host_id),
    )
    host = await cur.fetchone()
    if host is None:
        return None
    rows = await labels_by_source(conn, tenant_id, host_id)
    labels = effective_labels(
        ((r["source"], r["key"], r["value"]) for r in rows),
        name=host["name"],
        kind=host["kind"],
        owner=host["owner"],
    )
    await conn.execute(
        "UPDATE host SET labels = %s, updated_at = now() WHERE tenant_id = %s AND id = %s "
        "AND labels IS DISTINCT FROM %s",
        (Jsonb(labels), tenant_id, host_id, Jsonb(labels)),
    )
    return labels


async def set_owner(conn: Conn, tenant_id: UUID, host_id: UUID, team_id: UUID | None) -> None:
    await conn.execute(
        "UPDATE host SET owner_team_id = %s WHERE tenant_id = %s AND id = %s",
        (team_id, tenant_id, host_id),
    )
