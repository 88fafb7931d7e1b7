"""What the agent endpoints read and write per request: an agent's serving state, the served
artifact, a version reported in User-Agent, and the batched last-seen updates."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

from platformkit.db.scope import Conn


@dataclass(frozen=True)
class ServingState:
    tenant_id: UUID
    agent_id: UUID
    host_id: UUID
    kind: str
    external_id: str
    tenant_state: str
    version: str | None
    approved: bool
    quarantined: bool
    flags: list[str]
    desired_revision_id: int | None
    desired_artifact: bytes | None
    desired_since: datetime | None
    served_artifact: bytes | None
    identity_fingerprint: bytes | None = None  # bound client certificate: required on requests


_STATE = (
    "SELECT a.tenant_id, a.id AS agent_id, a.host_id, a.kind::text AS kind, a.external_id, "
    "t.state::text AS tenant_state, a.version, a.approved_at IS NOT NULL AS approved, "
    "a.quarantined_at IS NOT NULL AS quarantined, a.flags, a.desired_revision_id, "
    "a.desired_artifact, a.desired_since, a.served_artifact, a.identity_fingerprint "
    "FROM agent_instance a "
    "JOIN tenant t ON t.id = a.tenant_id WHERE a.tenant_id = %s AND a.id = ANY(%b)"
)


def _state(row: dict[str, Any]) -> ServingState:
    for key in ("desired_artifact", "served_artifact", "identity_fingerprint"):
        value = row[key]
        row[key] = bytes(value) if isinstance(value, (bytes, memoryview)) else None
    return ServingState(**row)


async def tenant_states(
    conn: Conn, tenant_id: UUID, *, after: UUID | None, limit: int
) -> list[ServingState]:
    """Every agent of the tenant in id order (warming a replica's cache)."""
    query = _STATE.replace("AND a.id = ANY(%b)", "AND (%s::uuid IS NULL OR a.id > %s)")
    cur = await conn.execute(query + " ORDER BY a.id LIMIT %s", (tenant_id, after, after, limit))
    return [_state(row) for row in await cur.fetchall()]


async def serving_state(conn: Conn, tenant_id: UUID, agent_id: UUID) -> ServingState | None:
    found = await serving_states(conn, tenant_id, [agent_id])
    return found[0] if found else None


async def serving_states(
    conn: Conn, tenant_id: UUID, agent_ids: Sequence[UUID]
) -> list[ServingState]:
    cur = await conn.execute(_STATE, (tenant_id, list(agent_ids)))
    return [_state(row) for row in await cur.fetchall()]


async def lock_agents(conn: Conn, tenant_id: UUID, agent_ids: Sequence[UUID]) -> None:
    """Lock rows in id order before a bulk UPDATE: writers on several replicas (batches, the
    reconciler) then never wait on each other in a cycle."""
    await conn.execute(
        "SELECT 1 FROM agent_instance WHERE tenant_id = %s AND id = ANY(%b) ORDER BY id "
        "FOR NO KEY UPDATE",
        (tenant_id, sorted(agent_ids)),
    )


async def mark_served(
    conn: Conn, tenant_id: UUID, served: Sequence[tuple[UUID, bytes, datetime]]
) -> list[tuple[UUID, bytes]]:
    """Record deliveries (agent, artifact, when); a stalled watcher that fetched again is
    updating again. Returns the deliveries recorded (not superseded by a newer one)."""
    cur = await conn.execute(
        "UPDATE agent_instance a SET served_artifact = v.art, served_at = v.ts, "
        "sync = CASE WHEN a.sync_reason = 'watcher_stalled' THEN 'updating'::agent_sync "
        "ELSE a.sync END, sync_reason = CASE WHEN a.sync_reason = 'watcher_stalled' THEN NULL "
        "ELSE a.sync_reason END FROM unnest(%b::uuid[], %b::bytea[], %b::timestamptz[]) "
        "AS v(id, art, ts) WHERE a.tenant_id = %s AND a.id = v.id "
        # replicas flush in any order: an older delivery never overwrites a newer one
        "AND (a.served_at IS NULL OR a.served_at <= v.ts) RETURNING a.id, v.art",
        ([s[0] for s in served], [s[1] for s in served], [s[2] for s in served], tenant_id),
    )
    return [(r["id"], bytes(r["art"])) for r in await cur.fetchall()]


async def set_version(
    conn: Conn, tenant_id: UUID, agent_id: UUID, version: str | None, raw: str | None
) -> bool:
    """Record a newly reported version (with its transition event); False when unchanged."""
    cur = await conn.execute(
        "WITH old AS (SELECT version FROM agent_instance WHERE tenant_id = %(t)s AND id = %(a)s),"
        " upd AS (UPDATE agent_instance SET version = %(v)s, version_raw = %(r)s "
        "WHERE tenant_id = %(t)s AND id = %(a)s AND version IS DISTINCT FROM %(v)s "
        "RETURNING id) INSERT INTO agent_status_event (tenant_id, agent_instance_id, field, "
        "from_value, to_value) SELECT %(t)s, upd.id, 'version', old.version, "
        "coalesce(%(v)s, %(r)s, '') FROM upd, old RETURNING agent_instance_id",
        {"t": tenant_id, "a": agent_id, "v": version, "r": raw},
    )
    return await cur.fetchone() is not None


async def touch_seen(
    conn: Conn, tenant_id: UUID, seen: Sequence[tuple[UUID, datetime, str | None]]
) -> list[UUID]:
    """Write last_seen_at and last_source_ip of many agents; the hosts whose agent's address
    changed (their zone labels may change)."""
    cur = await conn.execute(
        "WITH v AS (SELECT * FROM unnest(%b::uuid[], %b::timestamptz[], %b::inet[]) "
        "AS v(id, ts, ip)), old AS (SELECT a.id, a.last_source_ip FROM agent_instance a "
        "JOIN v ON v.id = a.id WHERE a.tenant_id = %s), upd AS (UPDATE agent_instance a "
        "SET last_seen_at = greatest(a.last_seen_at, v.ts), last_source_ip = "
        "coalesce(v.ip, a.last_source_ip) FROM v WHERE a.tenant_id = %s AND a.id = v.id "
        "RETURNING a.id, a.host_id, a.last_source_ip) SELECT DISTINCT upd.host_id FROM upd "
        "JOIN old ON old.id = upd.id WHERE old.last_source_ip IS DISTINCT FROM upd.last_source_ip",
        ([s[0] for s in seen], [s[1] for s in seen], [s[2] for s in seen], tenant_id, tenant_id),
    )
    return [r["host_id"] for r in await cur.fetchall()]
