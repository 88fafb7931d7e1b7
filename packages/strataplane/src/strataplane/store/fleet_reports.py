"""Writing agents' reports in batches: state columns of many agents in one statement, their
transitions (agent_status_event) and logs (agent_log_entry, the last 200 per agent)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

from platformkit import fastjson
from platformkit.db.scope import Conn
from psycopg.types.json import Jsonb

LOGS_KEPT = 200


@dataclass(frozen=True)
class ReportRow:
    """An agent's current report-related columns."""

    id: UUID
    health: str
    sync: str
    sync_reason: str | None
    version: str | None
    desired_artifact: bytes | None
    desired_revision_id: int | None
    served_artifact: bytes | None
    applied_artifact: bytes | None
    applied_revision_id: int | None
    last_seen_at: datetime | None = None


@dataclass(frozen=True)
class ReportUpdate:
    id: UUID
    seen_at: datetime
    health: str
    health_message: str | None
    sync: str
    sync_reason: str | None
    version: str | None
    version_raw: str | None
    applied_artifact: bytes | None
    applied_revision_id: int | None
    applied_changed: bool
    facts: dict[str, Any]


async def current_rows(conn: Conn, tenant_id: UUID, ids: Sequence[UUID]) -> list[ReportRow]:
    cur = await conn.execute(
        "SELECT id, health::text AS health, sync::text AS sync, sync_reason, version, "
        "desired_artifact, desired_revision_id, served_artifact, applied_artifact, "
        "applied_revision_id FROM agent_instance WHERE tenant_id = %s AND id = ANY(%b)",
        (tenant_id, list(ids)),
    )
    rows = []
    for r in await cur.fetchall():
        for key in ("desired_artifact", "served_artifact", "applied_artifact"):
            r[key] = bytes(r[key]) if r[key] is not None else None
        rows.append(ReportRow(**r))
    return rows


async def known_artifacts(conn: Conn, tenant_id: UUID, hashes: Sequence[bytes]) -> set[bytes]:
    if not hashes:
        return set()
    cur = await conn.execute(
        "SELECT hash FROM artifact WHERE tenant_id = %s AND hash = ANY(%b)",
        (tenant_id, list(hashes)),
    )
    return {bytes(r["hash"]) for r in await cur.fetchall()}


async def write_reports(conn: Conn, tenant_id: UUID, updates: Sequence[ReportUpdate]) -> None:
    if not updates:
        return
    cols = {
        "ids": [u.id for u in updates],
        "seen": [u.seen_at for u in updates],
        "health": [u.health for u in updates],
        "hmsg": [u.health_message for u in updates],
        "sync": [u.sync for u in updates],
        "reason": [u.sync_reason for u in updates],
        "ver": [u.version for u in updates],
        "raw": [u.version_raw for u in updates],
        "applied": [u.applied_artifact for u in updates],
        "arev": [u.applied_revision_id for u in updates],
        "achg": [u.applied_changed for u in updates],
        "facts": [Jsonb(u.facts, fastjson.dumps) for u in updates],
    }
    await conn.execute(
        "UPDATE agent_instance a SET last_seen_at = greatest(a.last_seen_at, v.seen), "
        "health = v.health::agent_health, health_message = v.hmsg, sync = v.sync::agent_sync, "
        "sync_reason = v.reason, version = coalesce(v.ver, a.version), "
        "version_raw = coalesce(v.raw, a.version_raw), applied_artifact = v.applied, "
        "applied_revision_id = v.arev, applied_at = CASE WHEN v.achg THEN v.seen "
        "ELSE a.applied_at END, facts = a.facts || v.facts FROM unnest(%(ids)b::uuid[], "
        "%(seen)b::timestamptz[], %(health)b::text[], %(hmsg)b::text[], %(sync)b::text[], "
        "%(reason)b::text[], %(ver)b::text[], %(raw)b::text[], %(applied)b::bytea[], "
        "%(arev)b::bigint[], %(achg)b::boolean[], %(facts)b::jsonb[]) AS v(id, seen, health, "
        "hmsg, sync, reason, ver, raw, applied, arev, achg, facts) "
        "WHERE a.tenant_id = %(t)s AND a.id = v.id",
        {**cols, "t": tenant_id},
    )


async def insert_events(
    conn: Conn, tenant_id: UUID, events: Sequence[tuple[UUID, str, str | None, str]]
) -> None:
    """Transitions (agent, field, from, to)."""
    if not events:
        return
    await conn.execute(
        "INSERT INTO agent_status_event (tenant_id, agent_instance_id, field, from_value, "
        "to_value) SELECT %s, * FROM unnest(%b::uuid[], %b::text[], %b::text[], %b::text[])",
        (
            tenant_id,
            [e[0] for e in events],
            [e[1] for e in events],
            [e[2] for e in events],
            [e[3] for e in events],
        ),
    )


async def insert_logs(
    conn: Conn,
    tenant_id: UUID,
    logs: Sequence[tuple[UUID, datetime, str, str, str | None, str, dict[str, Any] | None]],
) -> None:
    """(agent, ts, level, source, instance key, message, attributes), then keep the last 200
    per agent."""
    if not logs:
        return
    # COPY is refused under row-level security: one INSERT over arrays instead
    columns = [[row[i] for row in logs] for i in range(6)]
    attrs = [Jsonb(row[6], fastjson.dumps) if row[6] is not None else None for row in logs]
    await conn.execute(
        "INSERT INTO agent_log_entry (tenant_id, agent_instance_id, ts, level, source, "
        "instance_key, message, attributes) SELECT %s, * FROM unnest(%b::uuid[], "
        "%b::timestamptz[], %b::text[], %b::text[], %b::text[], %b::text[], %b::jsonb[])",
        (tenant_id, *columns, attrs),
    )
    await conn.execute(
        "DELETE FROM agent_log_entry e USING (SELECT id FROM (SELECT id, row_number() OVER "
        "(PARTITION BY agent_instance_id ORDER BY ts DESC, id DESC) AS n FROM agent_log_entry "
        "WHERE tenant_id = %s AND agent_instance_id = ANY(%b)) x WHERE n > %s) d "
        "WHERE e.id = d.id",
        (tenant_id, list({log[0] for log in logs}), LOGS_KEPT),
    )


async def recent_logs(conn: Conn, tenant_id: UUID, agent_id: UUID, limit: int) -> list[Any]:
    cur = await conn.execute(
        "SELECT ts, level, source, instance_key, message, attributes FROM agent_log_entry "
        "WHERE tenant_id = %s AND agent_instance_id = %s ORDER BY ts DESC, id DESC LIMIT %s",
        (tenant_id, agent_id, limit),
    )
    return list(await cur.fetchall())


async def status_events(conn: Conn, tenant_id: UUID, agent_id: UUID, limit: int) -> list[Any]:
    cur = await conn.execute(
        "SELECT ts, field, from_value, to_value, detail FROM agent_status_event "
        "WHERE tenant_id = %s AND agent_instance_id = %s ORDER BY ts DESC, id DESC LIMIT %s",
        (tenant_id, agent_id, limit),
    )
    return list(await cur.fetchall())
