"""The desired half of agent_instance: which agents need a render, and writing many agents'
desired revision and artifact at once, with their sync transitions (agent_status_event)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from uuid import UUID

from platformkit.db.scope import Conn


@dataclass(frozen=True)
class RenderInput:
    id: UUID
    kind: str
    version: str | None
    labels: dict[str, str]
    desired_revision_id: int | None = None
    sync: str = "updating"


@dataclass(frozen=True)
class DesiredUpdate:
    id: UUID
    revision_id: int
    artifact: bytes | None  # None: the render failed, the previous artifact stays
    unsupported: bool = False


async def render_inputs(
    conn: Conn,
    tenant_id: UUID,
    *,
    agent_ids: Sequence[UUID] | None = None,
    kind: str | None = None,
    stale_for: int | None = None,
    skip_failed: bool = False,
    after: UUID | None = None,
    limit: int = 5000,
) -> list[RenderInput]:
    """Agents by id, or those whose desired revision is not
    ``stale_for``; ``skip_failed`` leaves out agents whose last render failed."""
    cur = await conn.execute(
        "SELECT a.id, a.kind::text AS kind, a.version, h.labels, a.desired_revision_id, "
        "a.sync::text AS sync FROM agent_instance a "
        "JOIN host h ON h.tenant_id = a.tenant_id AND h.id = a.host_id "
        "WHERE a.tenant_id = %(t)s "
        "AND (%(ids)b::uuid[] IS NULL OR a.id = ANY(%(ids)b)) "
        "AND (%(kind)s::text IS NULL OR a.kind::text = %(kind)s) "
        "AND (%(rev)s::bigint IS NULL OR a.desired_revision_id IS DISTINCT FROM %(rev)s) "
        "AND NOT (%(skip)s AND a.sync = 'render_error') "
        "AND (%(after)s::uuid IS NULL OR a.id > %(after)s) ORDER BY a.id LIMIT %(l)s",
        {
            "t": tenant_id,
            "ids": list(agent_ids) if agent_ids is not None else None,
            "kind": kind,
            "rev": stale_for,
            "skip": skip_failed,
            "after": after,
            "l": limit,
        },
    )
    return [RenderInput(**r) for r in await cur.fetchall()]


_UPDATE = """
WITH v AS (
    SELECT * FROM unnest(%(ids)b::uuid[], %(revs)b::bigint[], %(arts)b::bytea[],
                         %(unsup)b::boolean[]) AS v(id, rev, art, unsupported)
), old AS (
    SELECT a.id, a.sync::text AS sync FROM agent_instance a JOIN v ON v.id = a.id
    WHERE a.tenant_id = %(t)s
), upd AS (
    UPDATE agent_instance a SET
        desired_revision_id = CASE WHEN v.art IS NULL THEN a.desired_revision_id ELSE v.rev END,
        desired_artifact = coalesce(v.art, a.desired_artifact),
        desired_since = CASE WHEN v.art IS NOT NULL AND v.art IS DISTINCT FROM a.desired_artifact
                             THEN now() ELSE a.desired_since END,
        sync = CASE WHEN v.unsupported THEN a.sync
                    WHEN v.art IS NULL THEN 'render_error'::agent_sync
                    WHEN a.applied_artifact = v.art THEN 'in_sync'::agent_sync
                    WHEN v.art IS DISTINCT FROM a.desired_artifact OR a.sync = 'render_error'
                         THEN 'updating'::agent_sync
                    ELSE a.sync END,
        sync_reason = CASE WHEN v.unsupported THEN a.sync_reason
                           WHEN v.art IS NULL OR a.applied_artifact = v.art
                                OR v.art IS DISTINCT FROM a.desired_artifact
                                OR a.sync = 'render_error' THEN NULL
                           ELSE a.sync_reason END,
        flags = CASE WHEN v.unsupported THEN ARRAY['unsupported_version']
                     ELSE array_remove(a.flags, 'unsupported_version') END
    FROM v WHERE a.tenant_id = %(t)s AND a.id = v.id
    AND (a.desired_revision_id IS DISTINCT FROM v.rev OR a.desired_artifact IS DISTINCT FROM v.art
         OR a.sync = 'render_error' OR v.art IS NULL OR v.unsupported
            <> ('unsupported_version' = ANY(a.flags)))
    RETURNING a.id, a.sync::text AS sync
), ev AS (
    INSERT INTO agent_status_event (tenant_id, agent_instance_id, field, from_value, to_value)
    SELECT %(t)s, upd.id, 'sync', old.sync, upd.sync FROM upd JOIN old ON old.id = upd.id
    WHERE old.sync <> upd.sync
)
SELECT count(*) AS n FROM upd
"""


async def write_desired(conn: Conn, tenant_id: UUID, updates: Sequence[DesiredUpdate]) -> int:
    """Apply renders: a failed one keeps the previous artifact and sets render_error; a new
    artifact moves desired_since (Telegraf's Last-Modified). Returns the rows changed."""
    if not updates:
        return 0
    cur = await conn.execute(
        _UPDATE,
        {
            "t": tenant_id,
            "ids": [u.id for u in updates],
            "revs": [u.revision_id for u in updates],
            "arts": [u.artifact for u in updates],
            "unsup": [u.unsupported for u in updates],
        },
    )
    row = await cur.fetchone()
    return int(row["n"]) if row is not None else 0


async def rendered_url(conn: Conn, tenant_id: UUID) -> str | None:
    """The agent URL the tenant's desired artifacts were last rendered with (fleet_render_url)."""
    cur = await conn.execute(
        "SELECT agent_url FROM fleet_render_url WHERE tenant_id = %s", (tenant_id,)
    )
    row = await cur.fetchone()
    return None if row is None else str(row["agent_url"])


async def set_rendered_url(conn: Conn, tenant_id: UUID, agent_url: str) -> None:
    await conn.execute(
        "INSERT INTO fleet_render_url (tenant_id, agent_url) VALUES (%s, %s) "
        "ON CONFLICT (tenant_id) DO UPDATE SET agent_url = EXCLUDED.agent_url, "
        "rendered_at = now()",
        (tenant_id, agent_url),
    )
