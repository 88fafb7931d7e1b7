"""audit_sink: export targets of a tenant's audit chain, each with the seq it exported last."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

from platformkit.db.scope import Conn
from psycopg.types.json import Jsonb

from strataplane.store.rows import one

_COLUMNS = (
    "id, tenant_id, kind, config, credential_id, cursor_seq, last_attempt_at, last_error, "
    "created_at"
)


@dataclass(frozen=True)
class AuditSink:
    id: UUID
    tenant_id: UUID
    kind: str
    config: dict[str, Any]
    credential_id: UUID | None
    cursor_seq: int
    last_attempt_at: datetime | None
    last_error: str | None
    created_at: datetime


async def latest_seq(conn: Conn, tenant_id: UUID) -> int:
    cur = await conn.execute(
        "SELECT coalesce(max(seq), 0) AS n FROM audit_event WHERE tenant_id = %s", (tenant_id,)
    )
    return int((await one(cur))["n"])


async def insert_sink(
    conn: Conn,
    tenant_id: UUID,
    sink_id: UUID,
    kind: str,
    config: dict[str, Any],
    credential_id: UUID | None,
    cursor_seq: int,
) -> AuditSink:
    cur = await conn.execute(
        "INSERT INTO audit_sink (id, tenant_id, kind, config, credential_id, cursor_seq) "
        f"VALUES (%s, %s, %s, %s, %s, %s) RETURNING {_COLUMNS}",
        (sink_id, tenant_id, kind, Jsonb(config), credential_id, cursor_seq),
    )
    return AuditSink(**await one(cur))


async def get_sink(conn: Conn, tenant_id: UUID, sink_id: UUID) -> AuditSink | None:
    cur = await conn.execute(
        f"SELECT {_COLUMNS} FROM audit_sink WHERE tenant_id = %s AND id = %s",
        (tenant_id, sink_id),
    )
    row = await cur.fetchone()
    return AuditSink(**row) if row is not None else None


async def list_sinks(conn: Conn, tenant_id: UUID) -> list[AuditSink]:
    cur = await conn.execute(
        f"SELECT {_COLUMNS} FROM audit_sink WHERE tenant_id = %s ORDER BY created_at, id",
        (tenant_id,),
    )
    return [AuditSink(**r) for r in await cur.fetchall()]


async def all_sinks(conn: Conn) -> list[tuple[UUID, UUID]]:
    """(tenant, sink) of every sink of tenants not being deleted (platform scope)."""
    cur = await conn.execute(
        "SELECT s.tenant_id, s.id FROM audit_sink s JOIN tenant t ON t.id = s.tenant_id "
        "WHERE t.state <> 'deleting' ORDER BY s.tenant_id, s.id"
    )
    return [(r["tenant_id"], r["id"]) for r in await cur.fetchall()]


async def delete_sink(conn: Conn, tenant_id: UUID, sink_id: UUID) -> UUID | None:
    """Delete the sink; its credential's sealed value id (deleted by the caller)."""
    cur = await conn.execute(
        "DELETE FROM audit_sink WHERE tenant_id = %s AND id = %s RETURNING credential_id",
        (tenant_id, sink_id),
    )
    row = await cur.fetchone()
    return row["credential_id"] if row is not None else None


async def lock_sink(conn: Conn, sink_id: UUID) -> bool:
    """One exporter per sink across every replica, for the transaction."""
    cur = await conn.execute(
        "SELECT pg_try_advisory_xact_lock(hashtextextended('audit_sink:' || %s::text, 0)) AS ok",
        (str(sink_id),),
    )
    return bool((await one(cur))["ok"])


async def advance(conn: Conn, tenant_id: UUID, sink_id: UUID, cursor_seq: int) -> None:
    await conn.execute(
        "UPDATE audit_sink SET cursor_seq = %s, last_attempt_at = now(), last_error = NULL "
        "WHERE tenant_id = %s AND id = %s AND cursor_seq < %s",
        (cursor_seq, tenant_id, sink_id, cursor_seq),
    )


async def failed(conn: Conn, tenant_id: UUID, sink_id: UUID, error: str) -> None:
    await conn.execute(
        "UPDATE audit_sink SET last_attempt_at = now(), last_error = %s "
        "WHERE tenant_id = %s AND id = %s",
        (error[:500], tenant_id, sink_id),
    )


async def events_after(conn: Conn, tenant_id: UUID, after: int, limit: int) -> list[dict[str, Any]]:
    """The tenant's audit events after seq ``after``, in seq order."""
    cur = await conn.execute(
        "SELECT tenant_id, seq, ts, actor_kind, actor_id, on_behalf_of, action, object_kind, "
        "object_id, request_id, source_ip, details, prev_hash, hash FROM audit_event "
        "WHERE tenant_id = %s AND seq > %s ORDER BY seq LIMIT %s",
        (tenant_id, after, limit),
    )
    return list(await cur.fetchall())


async def update_sink(
    conn: Conn,
    tenant_id: UUID,
    sink_id: UUID,
    *,
    config: dict[str, Any],
    credential_id: UUID | None,
) -> None:
    """New config and credential; the cursor stays."""
    await conn.execute(
        "UPDATE audit_sink SET config = %s, credential_id = %s WHERE tenant_id = %s AND id = %s",
        (Jsonb(config), credential_id, tenant_id, sink_id),
    )
