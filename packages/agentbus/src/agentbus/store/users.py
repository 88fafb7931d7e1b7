"""users and their tenant-level role (tenant_memberships)."""

from __future__ import annotations

import uuid
from typing import Any

from platformkit.db.scope import Conn
from platformkit.ids import uuid7

Row = dict[str, Any]

_SELECT = """SELECT u.id, u.tenant_id, u.idp, u.idp_subject, u.email, u.display_name, u.status,
    u.created_at, u.last_login_at, m.role::text AS tenant_role
    FROM users u LEFT JOIN tenant_memberships m ON m.tenant_id = u.tenant_id AND m.user_id = u.id"""


async def insert_user(
    conn: Conn,
    tenant_id: uuid.UUID,
    *,
    idp: str,
    idp_subject: str,
    email: str,
    display_name: str | None,
    status: str = "active",
) -> uuid.UUID:
    user_id = uuid7()
    await conn.execute(
        """INSERT INTO users (id, tenant_id, idp, idp_subject, email, display_name, status)
           VALUES (%s, %s, %s, %s, %s, %s, %s)""",
        (user_id, tenant_id, idp, idp_subject, email, display_name, status),
    )
    return user_id


async def add_tenant_membership(
    conn: Conn, tenant_id: uuid.UUID, user_id: uuid.UUID, role: str
) -> None:
    await conn.execute(
        "INSERT INTO tenant_memberships (tenant_id, user_id, role) VALUES (%s, %s, %s)",
        (tenant_id, user_id, role),
    )


async def get_user(conn: Conn, tenant_id: uuid.UUID, user_id: uuid.UUID) -> Row | None:
    """The user with ``tenant_role`` (None when not a tenant member)."""
    cur = await conn.execute(
        f"{_SELECT} WHERE u.tenant_id = %s AND u.id = %s", (tenant_id, user_id)
    )
    return await cur.fetchone()


async def list_users(conn: Conn, tenant_id: uuid.UUID) -> list[Row]:
    cur = await conn.execute(f"{_SELECT} WHERE u.tenant_id = %s ORDER BY u.id", (tenant_id,))
    return await cur.fetchall()


async def tenant_role(conn: Conn, tenant_id: uuid.UUID, user_id: uuid.UUID) -> str | None:
    cur = await conn.execute(
        "SELECT role::text AS role FROM tenant_memberships WHERE tenant_id = %s AND user_id = %s",
        (tenant_id, user_id),
    )
    row = await cur.fetchone()
    return None if row is None else str(row["role"])


async def lock_owners(conn: Conn, tenant_id: uuid.UUID) -> list[uuid.UUID]:
    """The active owners of the tenant, their memberships locked (one change of owners at a
    time, so the last one cannot be removed by two changes at once)."""
    cur = await conn.execute(
        """SELECT m.user_id FROM tenant_memberships m JOIN users u ON u.id = m.user_id
            WHERE m.tenant_id = %s AND m.role = 'owner' AND u.status = 'active'
            ORDER BY m.user_id FOR UPDATE OF m""",
        (tenant_id,),
    )
    return [row["user_id"] for row in await cur.fetchall()]


async def set_status(conn: Conn, tenant_id: uuid.UUID, user_id: uuid.UUID, status: str) -> None:
    await conn.execute(
        "UPDATE users SET status = %s WHERE tenant_id = %s AND id = %s",
        (status, tenant_id, user_id),
    )


async def set_tenant_role(conn: Conn, tenant_id: uuid.UUID, user_id: uuid.UUID, role: str) -> None:
    await conn.execute(
        """INSERT INTO tenant_memberships (tenant_id, user_id, role) VALUES (%s, %s, %s)
           ON CONFLICT (tenant_id, user_id) DO UPDATE SET role = excluded.role""",
        (tenant_id, user_id, role),
    )
