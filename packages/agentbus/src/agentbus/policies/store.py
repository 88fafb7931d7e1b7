"""policies (data model §1.8): SQL only, inside the tenant's scope. Every version is a row of
its own; ``enabled`` of the newest version of a name is what runs."""

from __future__ import annotations

import uuid
from typing import Any

from platformkit.db.scope import Conn
from platformkit.ids import uuid7

Row = dict[str, Any]
COLUMNS = "id, tenant_id, workspace_id, name, version, cedar, enabled, created_by, created_at"


async def tenant_policies(conn: Conn, tenant_id: uuid.UUID) -> list[Row]:
    """Every version of every policy of the tenant (the engine keeps the newest of each)."""
    cur = await conn.execute(
        f"SELECT {COLUMNS} FROM policies WHERE tenant_id = %s ORDER BY name, version",
        (tenant_id,),
    )
    return await cur.fetchall()


async def fingerprint(conn: Conn, tenant_id: uuid.UUID) -> tuple[int, Any]:
    """(rows, newest created_at) of the tenant's policies plus a digest of their ``enabled``
    flags: it changes with every write, so a cached set can be kept while it holds."""
    cur = await conn.execute(
        """SELECT count(*) AS n,
                  md5(string_agg(id::text || enabled::text, ',' ORDER BY id)) AS flags
             FROM policies WHERE tenant_id = %s""",
        (tenant_id,),
    )
    row = await cur.fetchone()
    assert row is not None
    return int(row["n"]), row["flags"]


async def get_policy(conn: Conn, tenant_id: uuid.UUID, policy_id: uuid.UUID) -> Row | None:
    cur = await conn.execute(
        f"SELECT {COLUMNS} FROM policies WHERE tenant_id = %s AND id = %s", (tenant_id, policy_id)
    )
    return await cur.fetchone()


async def lock_name(
    conn: Conn, tenant_id: uuid.UUID, workspace_id: uuid.UUID | None, name: str
) -> None:
    """Serialise writers of one policy name until the transaction ends: the table's UNIQUE
    treats a NULL workspace as distinct, so it cannot stop two tenant-wide rows of one name and
    version by itself."""
    await conn.execute(
        "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))",
        (f"agentbus.policy:{tenant_id}:{workspace_id}:{name}",),
    )


async def versions(
    conn: Conn, tenant_id: uuid.UUID, workspace_id: uuid.UUID | None, name: str
) -> list[Row]:
    """Every version of one policy, oldest first, locked until the transaction ends."""
    cur = await conn.execute(
        f"""SELECT {COLUMNS} FROM policies
             WHERE tenant_id = %s AND workspace_id IS NOT DISTINCT FROM %s AND name = %s
             ORDER BY version FOR UPDATE""",
        (tenant_id, workspace_id, name),
    )
    return await cur.fetchall()


async def insert_policy(
    conn: Conn,
    tenant_id: uuid.UUID,
    *,
    workspace_id: uuid.UUID | None,
    name: str,
    version: int,
    cedar: str,
    enabled: bool,
    created_by: uuid.UUID,
) -> Row:
    cur = await conn.execute(
        f"""INSERT INTO policies (id, tenant_id, workspace_id, name, version, cedar, enabled,
                                  created_by)
            VALUES (%s, %s, %s, %s, %s, %s, %s, %s) RETURNING {COLUMNS}""",
        (uuid7(), tenant_id, workspace_id, name, version, cedar, enabled, created_by),
    )
    row = await cur.fetchone()
    assert row is not None
    return row


async def set_enabled(conn: Conn, tenant_id: uuid.UUID, policy_id: uuid.UUID, enabled: bool) -> Row:
    cur = await conn.execute(
        f"UPDATE policies SET enabled = %s WHERE tenant_id = %s AND id = %s RETURNING {COLUMNS}",
        (enabled, tenant_id, policy_id),
    )
    row = await cur.fetchone()
    assert row is not None
    return row


async def first_owner(conn: Conn, tenant_id: uuid.UUID) -> uuid.UUID | None:
    """The tenant's earliest owner: ``created_by`` of what the platform writes for it."""
    cur = await conn.execute(
        """SELECT user_id FROM tenant_memberships WHERE tenant_id = %s AND role = 'owner'
            ORDER BY created_at, user_id LIMIT 1""",
        (tenant_id,),
    )
    row = await cur.fetchone()
    return None if row is None else row["user_id"]


async def recent_messages(conn: Conn, tenant_id: uuid.UUID, limit: int) -> list[Row]:
    """The tenant's last ``limit`` messages (task requests and accepts among them) with what a
    policy sees of them, newest first."""
    cur = await conn.execute(
        """SELECT m.id, m.type, m.capability, m.payload_bytes, m.priority, m.accepted_at,
                  m.from_agent_id, m.to_agent_id
             FROM messages m WHERE m.tenant_id = %s AND m.to_agent_id IS NOT NULL
            ORDER BY m.accepted_at DESC, m.id DESC LIMIT %s""",
        (tenant_id, limit),
    )
    return await cur.fetchall()


async def agents_by_id(
    conn: Conn, tenant_id: uuid.UUID, ids: list[uuid.UUID]
) -> dict[uuid.UUID, Row]:
    cur = await conn.execute(
        """SELECT id, workspace_id, owner_user_id, name, address, harness::text AS harness,
                  capabilities FROM agents WHERE tenant_id = %s AND id = ANY(%s)""",
        (tenant_id, ids),
    )
    return {row["id"]: row for row in await cur.fetchall()}
