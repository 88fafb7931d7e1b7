"""trust_anchor: the CAs a tenant accepts for agent mTLS, and binding an agent's certificate
(agent_instance.identity_*), which makes its assurance high."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from uuid import UUID

from platformkit.db.scope import Conn

from strataplane.store.rows import one

_COLUMNS = "id, tenant_id, name, ca_pem, crl_url, host_mapping, created_at"


@dataclass(frozen=True)
class TrustAnchor:
    id: UUID
    tenant_id: UUID
    name: str
    ca_pem: str
    crl_url: str | None
    host_mapping: str
    created_at: datetime


async def insert_anchor(
    conn: Conn,
    tenant_id: UUID,
    anchor_id: UUID,
    name: str,
    ca_pem: str,
    crl_url: str | None,
    host_mapping: str,
) -> TrustAnchor:
    cur = await conn.execute(
        "INSERT INTO trust_anchor (id, tenant_id, name, ca_pem, crl_url, host_mapping) "
        f"VALUES (%s, %s, %s, %s, %s, %s) RETURNING {_COLUMNS}",
        (anchor_id, tenant_id, name, ca_pem, crl_url, host_mapping),
    )
    return TrustAnchor(**await one(cur))


async def list_anchors(conn: Conn, tenant_id: UUID) -> list[TrustAnchor]:
    cur = await conn.execute(
        f"SELECT {_COLUMNS} FROM trust_anchor WHERE tenant_id = %s ORDER BY name", (tenant_id,)
    )
    return [TrustAnchor(**r) for r in await cur.fetchall()]


async def get_anchor(conn: Conn, tenant_id: UUID, anchor_id: UUID) -> TrustAnchor | None:
    cur = await conn.execute(
        f"SELECT {_COLUMNS} FROM trust_anchor WHERE tenant_id = %s AND id = %s",
        (tenant_id, anchor_id),
    )
    row = await cur.fetchone()
    return TrustAnchor(**row) if row is not None else None


async def delete_anchor(conn: Conn, tenant_id: UUID, anchor_id: UUID) -> int:
    """Unbind the agents it identified (they drop to assurance low), then delete it; how many
    agents were unbound."""
    cur = await conn.execute(
        "UPDATE agent_instance SET identity_subject = NULL, identity_fingerprint = NULL, "
        "identity_anchor_id = NULL, identity_not_after = NULL "
        "WHERE tenant_id = %s AND identity_anchor_id = %s",
        (tenant_id, anchor_id),
    )
    unbound = cur.rowcount
    await conn.execute(
        "DELETE FROM trust_anchor WHERE tenant_id = %s AND id = %s", (tenant_id, anchor_id)
    )
    return unbound


async def unbind_identity(conn: Conn, tenant_id: UUID, agent_id: UUID) -> None:
    await conn.execute(
        "UPDATE agent_instance SET identity_subject = NULL, identity_fingerprint = NULL, "
        "identity_anchor_id = NULL, identity_not_after = NULL WHERE tenant_id = %s AND id = %s",
        (tenant_id, agent_id),
    )


async def bind_identity(
    conn: Conn,
    tenant_id: UUID,
    agent_id: UUID,
    *,
    subject: str,
    fingerprint: bytes,
    anchor_id: UUID,
    not_after: datetime,
) -> bool:
    """Bind the certificate to an agent that has none bound (never replaces a binding)."""
    cur = await conn.execute(
        "UPDATE agent_instance SET identity_subject = %s, identity_fingerprint = %s, "
        "identity_anchor_id = %s, identity_not_after = %s "
        "WHERE tenant_id = %s AND id = %s AND identity_fingerprint IS NULL",
        (subject, fingerprint, anchor_id, not_after, tenant_id, agent_id),
    )
    return cur.rowcount == 1


async def host_name(conn: Conn, tenant_id: UUID, agent_id: UUID) -> str | None:
    cur = await conn.execute(
        "SELECT h.name FROM agent_instance a JOIN host h ON h.tenant_id = a.tenant_id "
        "AND h.id = a.host_id WHERE a.tenant_id = %s AND a.id = %s",
        (tenant_id, agent_id),
    )
    row = await cur.fetchone()
    return row["name"] if row is not None else None
