"""agents and agent_keys (data model §1.5)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from platformkit.db.scope import Conn
from psycopg import AsyncCursor
from psycopg.types.json import Jsonb

Row = dict[str, Any]

COLUMNS = """id, tenant_id, workspace_id, owner_user_id, name, address, display_name, description,
    capabilities, agent_card, harness::text AS harness, harness_version, mode,
    visibility::text AS visibility, status::text AS status, nats_consumer, inbox_subject,
    delivery, last_seen_at, last_host, created_at, updated_at, deleted_at"""
KEY_COLUMNS = """id, tenant_id, agent_id, public_key, fingerprint, spiffe_id, created_at,
    expires_at, revoked_at"""


async def insert_agent(conn: Conn, tenant_id: uuid.UUID, values: Row) -> Row:
    """``values`` holds every column but the defaults; json columns are plain Python values."""
    names = list(values)
    params = [
        Jsonb(v) if n in ("capabilities", "agent_card", "delivery") else v
        for n, v in values.items()
    ]
    cur = await conn.execute(
        f"""INSERT INTO agents (tenant_id, {", ".join(names)})
            VALUES (%s, {", ".join(["%s"] * len(names))}) RETURNING {COLUMNS}""",
        [tenant_id, *params],
    )
    row = await cur.fetchone()
    assert row is not None
    return row


async def agents_cursor(
    conn: Conn, tenant_id: uuid.UUID, agent_ids: list[uuid.UUID]
) -> AsyncCursor[Row]:
    """``get_agent`` for several ids: the rows that exist, fetched later."""
    return await conn.execute(
        f"SELECT {COLUMNS} FROM agents WHERE tenant_id = %s AND id = ANY(%s)",
        (tenant_id, agent_ids),
    )


async def get_agent(conn: Conn, tenant_id: uuid.UUID, agent_id: uuid.UUID) -> Row | None:
    cur = await conn.execute(
        f"SELECT {COLUMNS} FROM agents WHERE tenant_id = %s AND id = %s", (tenant_id, agent_id)
    )
    return await cur.fetchone()


async def agent_by_name(
    conn: Conn, tenant_id: uuid.UUID, workspace_id: uuid.UUID, name: str
) -> Row | None:
    cur = await conn.execute(
        f"SELECT {COLUMNS} FROM agents WHERE tenant_id = %s AND workspace_id = %s AND name = %s",
        (tenant_id, workspace_id, name),
    )
    return await cur.fetchone()


async def agent_by_address(conn: Conn, tenant_id: uuid.UUID, address: str) -> Row | None:
    """A live agent by address (the ``UNIQUE (address)`` index)."""
    cur = await conn.execute(
        f"""SELECT {COLUMNS} FROM agents
            WHERE tenant_id = %s AND address = %s AND deleted_at IS NULL""",
        (tenant_id, address),
    )
    return await cur.fetchone()


async def by_address_cursor(
    conn: Conn, tenant_id: uuid.UUID, addresses: list[str]
) -> AsyncCursor[Row]:
    """``agent_by_address`` for several addresses: the live agents, fetched later."""
    return await conn.execute(
        f"""SELECT {COLUMNS} FROM agents
            WHERE tenant_id = %s AND address = ANY(%s) AND deleted_at IS NULL""",
        (tenant_id, addresses),
    )


@dataclass(frozen=True)
class Viewer:
    """Who looks at the directory: an agent (its id, workspace and owner), or an integration
    token (its workspace, None for a tenant-wide one)."""

    workspace_id: uuid.UUID | None
    agent_id: uuid.UUID | None = None
    owner_user_id: uuid.UUID | None = None


def _like(text: str) -> str:
    escaped = text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


async def list_agents(
    conn: Conn,
    tenant_id: uuid.UUID,
    viewer: Viewer,
    *,
    filters: Row,
    after: tuple[datetime, uuid.UUID] | None,
    limit: int,
) -> list[Row]:
    """Live agents the viewer may see, oldest first: an agent sees what conventions §2 lets it
    address (another owner's private agents never, workspace-visible agents of its own
    workspace only) and itself; a token sees its tenant's agents, or its workspace's. ``filters``
    holds any of ``workspace_id``, ``status``, ``capability`` (a name, by the GIN index) and
    ``q`` (in the name, display name or description); ``after``: the (created_at, id) of the
    last row of the page before."""
    where = ["tenant_id = %s", "deleted_at IS NULL"]
    params: list[Any] = [tenant_id]
    if viewer.agent_id is not None:
        where.append(
            """(id = %s OR ((visibility <> 'private' OR owner_user_id = %s)
                AND (visibility <> 'workspace' OR workspace_id = %s)))"""
        )
        params += [viewer.agent_id, viewer.owner_user_id, viewer.workspace_id]
    elif viewer.workspace_id is not None:
        where.append("workspace_id = %s")
        params.append(viewer.workspace_id)
    for column in ("workspace_id", "status"):
        if filters.get(column) is not None:
            where.append(f"{column} = %s")  # column names from the tuple above, never input
            params.append(filters[column])
    if filters.get("capability") is not None:
        where.append("capabilities @> %s")
        params.append(Jsonb([{"name": filters["capability"]}]))
    if filters.get("q"):
        where.append("(name ILIKE %s OR display_name ILIKE %s OR description ILIKE %s)")
        params += [_like(filters["q"])] * 3
    if after is not None:
        where.append("(created_at, id) > (%s, %s)")
        params.extend(after)
    cur = await conn.execute(
        f"""SELECT {COLUMNS} FROM agents WHERE {" AND ".join(where)}
            ORDER BY created_at, id LIMIT %s""",
        (*params, limit),
    )
    return await cur.fetchall()


async def update_agent(conn: Conn, tenant_id: uuid.UUID, agent_id: uuid.UUID, values: Row) -> Row:
    """Set ``values`` (column -> value; json columns as plain Python values) and
    ``updated_at``."""
    names = list(values)
    params = [Jsonb(v) if n in ("capabilities", "agent_card", "delivery") else v
              for n, v in values.items()]  # fmt: skip
    sets = ", ".join(f"{name} = %s" for name in names)  # names are the body's known fields
    cur = await conn.execute(
        f"""UPDATE agents SET {sets}, updated_at = now()
            WHERE tenant_id = %s AND id = %s RETURNING {COLUMNS}""",
        [*params, tenant_id, agent_id],
    )
    row = await cur.fetchone()
    assert row is not None, "the caller found the agent in this transaction"
    return row


async def mark_deleted(conn: Conn, tenant_id: uuid.UUID, agent_id: uuid.UUID) -> None:
    await conn.execute(
        """UPDATE agents SET status = 'deleted', deleted_at = now(), updated_at = now()
            WHERE tenant_id = %s AND id = %s""",
        (tenant_id, agent_id),
    )


async def disable_all(conn: Conn, tenant_id: uuid.UUID) -> int:
    """Disable every live agent of the tenant; how many were not disabled yet."""
    cur = await conn.execute(
        """UPDATE agents SET status = 'disabled', updated_at = now()
            WHERE tenant_id = %s AND deleted_at IS NULL AND status <> 'disabled'""",
        (tenant_id,),
    )
    return cur.rowcount


async def count_live_agents(conn: Conn, tenant_id: uuid.UUID) -> int:
    cur = await conn.execute(
        "SELECT count(*) AS n FROM agents WHERE tenant_id = %s AND deleted_at IS NULL",
        (tenant_id,),
    )
    row = await cur.fetchone()
    return int(row["n"]) if row else 0


async def insert_key(
    conn: Conn,
    tenant_id: uuid.UUID,
    *,
    key_id: uuid.UUID,
    agent_id: uuid.UUID,
    public_key: bytes,
    fingerprint: str,
    spiffe_id: str,
    expires_at: datetime,
) -> Row:
    cur = await conn.execute(
        f"""INSERT INTO agent_keys (id, tenant_id, agent_id, public_key, fingerprint, spiffe_id,
                                    expires_at)
            VALUES (%s, %s, %s, %s, %s, %s, %s) RETURNING {KEY_COLUMNS}""",
        (key_id, tenant_id, agent_id, public_key, fingerprint, spiffe_id, expires_at),
    )
    row = await cur.fetchone()
    assert row is not None
    return row


async def keys_cursor(
    conn: Conn, tenant_id: uuid.UUID, key_ids: list[uuid.UUID]
) -> AsyncCursor[Row]:
    """``get_key`` for several ids: the rows that exist, fetched later."""
    return await conn.execute(
        f"SELECT {KEY_COLUMNS} FROM agent_keys WHERE tenant_id = %s AND id = ANY(%s)",
        (tenant_id, key_ids),
    )


async def get_key(conn: Conn, tenant_id: uuid.UUID, key_id: uuid.UUID) -> Row | None:
    cur = await conn.execute(
        f"SELECT {KEY_COLUMNS} FROM agent_keys WHERE tenant_id = %s AND id = %s",
        (tenant_id, key_id),
    )
    return await cur.fetchone()


async def key_by_public_key(
    conn: Conn, tenant_id: uuid.UUID, agent_id: uuid.UUID, public_key: bytes
) -> Row | None:
    cur = await conn.execute(
        f"""SELECT {KEY_COLUMNS} FROM agent_keys
            WHERE tenant_id = %s AND agent_id = %s AND public_key = %s""",
        (tenant_id, agent_id, public_key),
    )
    return await cur.fetchone()


async def keys_of_agent(
    conn: Conn, tenant_id: uuid.UUID, agent_id: uuid.UUID, *, lock: bool = False
) -> list[Row]:
    """The agent's keys, oldest first; ``lock`` holds them until the transaction ends, so that
    adding and revoking keys of one agent take turns."""
    cur = await conn.execute(
        f"""SELECT {KEY_COLUMNS} FROM agent_keys WHERE tenant_id = %s AND agent_id = %s
            ORDER BY created_at, id {"FOR UPDATE" if lock else ""}""",
        (tenant_id, agent_id),
    )
    return await cur.fetchall()


async def revoke_key(conn: Conn, tenant_id: uuid.UUID, key_id: uuid.UUID) -> Row | None:
    cur = await conn.execute(
        f"""UPDATE agent_keys SET revoked_at = now()
            WHERE tenant_id = %s AND id = %s AND revoked_at IS NULL RETURNING {KEY_COLUMNS}""",
        (tenant_id, key_id),
    )
    return await cur.fetchone()


async def workspace_by_slug(conn: Conn, tenant_id: uuid.UUID, slug: str) -> Row | None:
    cur = await conn.execute(
        """SELECT id, tenant_id, slug, deleted_at FROM workspaces
           WHERE tenant_id = %s AND slug = %s""",
        (tenant_id, slug),
    )
    return await cur.fetchone()


async def workspace_role(
    conn: Conn, tenant_id: uuid.UUID, workspace_id: uuid.UUID, user_id: uuid.UUID
) -> str | None:
    cur = await conn.execute(
        """SELECT role::text AS role FROM workspace_memberships
           WHERE tenant_id = %s AND workspace_id = %s AND user_id = %s""",
        (tenant_id, workspace_id, user_id),
    )
    row = await cur.fetchone()
    return None if row is None else str(row["role"])


async def workspace_by_id(conn: Conn, tenant_id: uuid.UUID, workspace_id: uuid.UUID) -> Row | None:
    cur = await conn.execute(
        "SELECT id, tenant_id, slug, deleted_at FROM workspaces WHERE tenant_id = %s AND id = %s",
        (tenant_id, workspace_id),
    )
    return await cur.fetchone()


async def record_heartbeat(
    conn: Conn,
    tenant_id: uuid.UUID,
    agent_id: uuid.UUID,
    *,
    status: str,
    harness_version: str | None,
    host: str | None,
) -> bool:
    """A live agent's presence: ``status`` (``online`` or ``idle``), ``last_seen_at``, and the
    harness version and host its sidecar reports; False for a disabled or deleted agent."""
    cur = await conn.execute(
        """UPDATE agents SET status = %s::agent_status_t, last_seen_at = now(),
                  harness_version = COALESCE(%s, harness_version),
                  last_host = COALESCE(%s, last_host)
            WHERE tenant_id = %s AND id = %s AND deleted_at IS NULL
              AND status NOT IN ('disabled', 'deleted')
        RETURNING id""",
        (status, harness_version, host, tenant_id, agent_id),
    )
    return await cur.fetchone() is not None


async def mark_offline(conn: Conn, tenant_id: uuid.UUID, seen_before: datetime) -> int:
    """``online`` and ``idle`` agents last seen before ``seen_before`` become ``offline``."""
    cur = await conn.execute(
        """UPDATE agents SET status = 'offline'
            WHERE tenant_id = %s AND status IN ('online', 'idle')
              AND (last_seen_at IS NULL OR last_seen_at < %s)
        RETURNING id""",
        (tenant_id, seen_before),
    )
    return len(await cur.fetchall())
