"""agent_instance and agent_credential: enrolled agents, what they should run, were served and
applied, and their bearer credentials (only sha256(token) is stored)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from uuid import UUID

from platformkit.db.scope import Conn
from psycopg.types.json import Jsonb

from strataplane.store.rows import maybe

AGENT_COLUMNS = (
    "a.id, a.tenant_id, a.host_id, a.kind::text AS kind, a.external_id, a.version, "
    "a.version_raw, a.enrollment_token_id, a.enrolled_at, a.approved_at, "
    "a.assurance::text AS assurance, a.health::text AS health, a.health_message, "
    "a.sync::text AS sync, a.sync_reason, a.flags, a.quarantined_at, a.quarantine_reason, "
    "a.desired_revision_id, a.desired_artifact, a.desired_since, a.served_artifact, a.served_at, "
    "a.applied_revision_id, a.applied_artifact, a.applied_at, a.last_seen_at, "
    "host(a.last_source_ip) AS last_source_ip, a.facts, a.created_at"
)


@dataclass(frozen=True)
class Agent:
    id: UUID
    tenant_id: UUID
    host_id: UUID
    kind: str
    external_id: str
    version: str | None
    version_raw: str | None
    enrollment_token_id: UUID | None
    enrolled_at: datetime
    approved_at: datetime | None
    assurance: str
    health: str
    health_message: str | None
    sync: str
    sync_reason: str | None
    flags: list[str]
    quarantined_at: datetime | None
    quarantine_reason: str | None
    desired_revision_id: int | None
    desired_artifact: bytes | None
    desired_since: datetime | None
    served_artifact: bytes | None
    served_at: datetime | None
    applied_revision_id: int | None
    applied_artifact: bytes | None
    applied_at: datetime | None
    last_seen_at: datetime | None
    last_source_ip: str | None
    facts: dict[str, Any]
    created_at: datetime


@dataclass(frozen=True)
class Credential:
    id: UUID
    tenant_id: UUID
    agent_instance_id: UUID
    revoked_at: datetime | None


async def insert_agent(conn: Conn, tenant_id: UUID, agent_id: UUID, **f: Any) -> None:
    await conn.execute(
        "INSERT INTO agent_instance (id, tenant_id, host_id, kind, external_id, "
        "enrollment_token_id, approved_at, last_source_ip) VALUES (%(id)s, %(t)s, %(host_id)s, "
        "%(kind)s, %(external_id)s, %(token_id)s, %(approved_at)s, %(ip)s)",
        {**f, "id": agent_id, "t": tenant_id},
    )


async def get_agent(conn: Conn, tenant_id: UUID, agent_id: UUID) -> Agent | None:
    cur = await conn.execute(
        f"SELECT {AGENT_COLUMNS} FROM agent_instance a WHERE a.tenant_id = %s AND a.id = %s",
        (tenant_id, agent_id),
    )
    row = await maybe(cur)
    return Agent(**_bytes(row)) if row is not None else None


async def find_agent(conn: Conn, tenant_id: UUID, kind: str, external_id: str) -> Agent | None:
    cur = await conn.execute(
        f"SELECT {AGENT_COLUMNS} FROM agent_instance a WHERE a.tenant_id = %s AND a.kind = %s "
        "AND a.external_id = %s",
        (tenant_id, kind, external_id),
    )
    row = await maybe(cur)
    return Agent(**_bytes(row)) if row is not None else None


async def list_agents(
    conn: Conn,
    tenant_id: UUID,
    *,
    host_id: UUID | None = None,
    kind: str | None = None,
    after: UUID | None = None,
    limit: int = 1000,
) -> list[Agent]:
    cur = await conn.execute(
        f"SELECT {AGENT_COLUMNS} FROM agent_instance a WHERE a.tenant_id = %(t)s "
        "AND (%(h)s::uuid IS NULL OR a.host_id = %(h)s) AND (%(k)s::text IS NULL OR "
        "a.kind::text = %(k)s) AND (%(a)s::uuid IS NULL OR a.id > %(a)s) ORDER BY a.id "
        "LIMIT %(l)s",
        {"t": tenant_id, "h": host_id, "k": kind, "a": after, "l": limit},
    )
    return [Agent(**_bytes(r)) for r in await cur.fetchall()]


@dataclass(frozen=True)
class AgentFilter:
    kind: str | None = None
    health: str | None = None
    sync: str | None = None
    version: str | None = None
    host_id: UUID | None = None
    labels: Mapping[str, str] = field(default_factory=dict)  # the host's effective labels


async def search_agents(
    conn: Conn, tenant_id: UUID, where: AgentFilter, *, after: UUID | None, limit: int
) -> list[tuple[Agent, UUID | None, dict[str, str]]]:
    """(agent, its host's owner team, its host's labels) by id, one query."""
    cur = await conn.execute(
        f"SELECT {AGENT_COLUMNS}, h.owner_team_id AS host_owner, h.labels AS host_labels "
        "FROM agent_instance a JOIN host h ON h.tenant_id = a.tenant_id AND h.id = a.host_id "
        "WHERE a.tenant_id = %(t)s "
        "AND (%(k)s::text IS NULL OR a.kind::text = %(k)s) "
        "AND (%(hl)s::text IS NULL OR a.health::text = %(hl)s) "
        "AND (%(s)s::text IS NULL OR a.sync::text = %(s)s) "
        "AND (%(v)s::text IS NULL OR a.version = %(v)s) "
        "AND (%(h)s::uuid IS NULL OR a.host_id = %(h)s) "
        "AND h.labels @> %(l)s AND (%(a)s::uuid IS NULL OR a.id > %(a)s) "
        "ORDER BY a.id LIMIT %(n)s",
        {
            "t": tenant_id,
            "k": where.kind,
            "hl": where.health,
            "s": where.sync,
            "v": where.version,
            "h": where.host_id,
            "l": Jsonb(dict(where.labels)),
            "a": after,
            "n": limit,
        },
    )
    found = []
    for r in await cur.fetchall():
        owner, labels = r.pop("host_owner"), r.pop("host_labels")
        found.append((Agent(**_bytes(r)), owner, labels))
    return found


def _bytes(row: dict[str, Any]) -> dict[str, Any]:
    for key in ("desired_artifact", "served_artifact", "applied_artifact"):
        if row[key] is not None:
            row[key] = bytes(row[key])
    return row


async def approve(conn: Conn, tenant_id: UUID, agent_id: UUID) -> None:
    await conn.execute(
        "UPDATE agent_instance SET approved_at = coalesce(approved_at, now()) "
        "WHERE tenant_id = %s AND id = %s",
        (tenant_id, agent_id),
    )


async def delete_agent(conn: Conn, tenant_id: UUID, agent_id: UUID) -> None:
    await conn.execute(
        "DELETE FROM agent_instance WHERE tenant_id = %s AND id = %s", (tenant_id, agent_id)
    )


async def insert_credential(
    conn: Conn, tenant_id: UUID, cred_id: UUID, agent_id: UUID, prefix: str, token_hash: bytes
) -> None:
    """Revokes the agent's previous credential: at most one is unrevoked."""
    await revoke_credentials(conn, tenant_id, agent_id)
    await conn.execute(
        "INSERT INTO agent_credential (id, tenant_id, agent_instance_id, token_prefix, "
        "token_hash) VALUES (%s, %s, %s, %s, %s)",
        (cred_id, tenant_id, agent_id, prefix, token_hash),
    )


async def revoke_credentials(conn: Conn, tenant_id: UUID, agent_id: UUID) -> list[bytes]:
    """Revoke the agent's credentials; the hashes revoked (for cache invalidation)."""
    cur = await conn.execute(
        "UPDATE agent_credential SET revoked_at = now() WHERE tenant_id = %s "
        "AND agent_instance_id = %s AND revoked_at IS NULL RETURNING token_hash",
        (tenant_id, agent_id),
    )
    return [bytes(r["token_hash"]) for r in await cur.fetchall()]


async def lookup_credentials(conn: Conn, token_hashes: Sequence[bytes]) -> dict[bytes, Credential]:
    """By hash, across tenants: call in platform scope."""
    cur = await conn.execute(
        "SELECT token_hash, id, tenant_id, agent_instance_id, revoked_at FROM agent_credential "
        "WHERE token_hash = ANY(%b)",
        (list(token_hashes),),
    )
    found = {}
    for row in await cur.fetchall():
        digest = bytes(row.pop("token_hash"))
        found[digest] = Credential(**row)
    return found
