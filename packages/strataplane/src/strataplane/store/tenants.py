"""tenant and installation: tenants, their lifecycle state and controller shard."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

from platformkit.db.scope import Conn
from psycopg.types.json import Jsonb

from strataplane.store.rows import one

_COLUMNS = (
    "id, slug, display_name, state, shard, limits, external_id, created_at, updated_at, state_since"
)


@dataclass(frozen=True)
class Tenant:
    id: UUID
    slug: str
    display_name: str
    state: str
    shard: int
    limits: dict[str, Any]
    external_id: str | None
    created_at: datetime
    updated_at: datetime
    state_since: datetime


async def ensure_installation(conn: Conn, shards: int) -> int:
    """Write the installation row once (the first serve); return the fixed shard count."""
    await conn.execute(
        "INSERT INTO installation (id, shards) VALUES (true, %s) ON CONFLICT (id) DO NOTHING",
        (shards,),
    )
    return await installation_shards(conn) or shards


async def installation_shards(conn: Conn) -> int | None:
    row = await (await conn.execute("SELECT shards FROM installation WHERE id")).fetchone()
    return int(row["shards"]) if row is not None else None


async def pick_shard(conn: Conn, shards: int) -> int:
    """The shard holding the fewest tenants (lowest number on ties); fixed at creation."""
    cur = await conn.execute(
        "SELECT s.n FROM generate_series(0, %s - 1) AS s(n) "
        "LEFT JOIN tenant t ON t.shard = s.n GROUP BY s.n ORDER BY count(t.id), s.n LIMIT 1",
        (shards,),
    )
    row = await cur.fetchone()
    return int(row["n"]) if row is not None else 0


async def insert_tenant(
    conn: Conn, tenant_id: UUID, slug: str, display_name: str, shard: int, limits: dict[str, Any]
) -> Tenant:
    cur = await conn.execute(
        f"INSERT INTO tenant (id, slug, display_name, shard, limits) VALUES (%s, %s, %s, %s, %s) "
        f"RETURNING {_COLUMNS}",
        (tenant_id, slug, display_name, shard, Jsonb(limits)),
    )
    return Tenant(**await one(cur))


async def get_tenant(conn: Conn, tenant_id: UUID, *, lock: bool = False) -> Tenant | None:
    suffix = " FOR UPDATE" if lock else ""
    cur = await conn.execute(f"SELECT {_COLUMNS} FROM tenant WHERE id = %s{suffix}", (tenant_id,))
    row = await cur.fetchone()
    return Tenant(**row) if row is not None else None


async def get_tenant_by_slug(conn: Conn, slug: str) -> Tenant | None:
    cur = await conn.execute(f"SELECT {_COLUMNS} FROM tenant WHERE slug = %s", (slug,))
    row = await cur.fetchone()
    return Tenant(**row) if row is not None else None


async def list_tenants(conn: Conn, *, after: str | None, limit: int) -> list[Tenant]:
    cur = await conn.execute(
        f"SELECT {_COLUMNS} FROM tenant WHERE %(after)s::text IS NULL OR slug > %(after)s "
        "ORDER BY slug LIMIT %(limit)s",
        {"after": after, "limit": limit},
    )
    return [Tenant(**row) for row in await cur.fetchall()]


async def set_state(conn: Conn, tenant_id: UUID, state: str) -> Tenant:
    cur = await conn.execute(
        f"UPDATE tenant SET state = %s, state_since = now(), updated_at = now() WHERE id = %s "
        f"RETURNING {_COLUMNS}",
        (state, tenant_id),
    )
    return Tenant(**await one(cur))


async def delete_tenant(conn: Conn, tenant_id: UUID) -> None:
    await conn.execute("DELETE FROM tenant WHERE id = %s", (tenant_id,))
