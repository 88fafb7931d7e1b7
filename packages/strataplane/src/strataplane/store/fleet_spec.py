"""release: the release pointer per tenant and agent kind (schema: release)."""

from __future__ import annotations

from uuid import UUID

from platformkit.db.scope import Conn

from strataplane.store import revisions


async def release_revision(conn: Conn, tenant_id: UUID, agent_kind: str) -> int | None:
    """The release pointer; a tenant without one follows its latest revision."""
    cur = await conn.execute(
        "SELECT revision_id FROM release WHERE tenant_id = %s AND agent_kind = %s",
        (tenant_id, agent_kind),
    )
    row = await cur.fetchone()
    if row is not None:
        return int(row["revision_id"])
    return await revisions.latest_id(conn, tenant_id) or None


async def pointer(conn: Conn, tenant_id: UUID, agent_kind: str) -> int | None:
    """The release row's revision; None when the kind was never released."""
    cur = await conn.execute(
        "SELECT revision_id FROM release WHERE tenant_id = %s AND agent_kind = %s",
        (tenant_id, agent_kind),
    )
    row = await cur.fetchone()
    return None if row is None else int(row["revision_id"])


async def complete_release(
    conn: Conn, tenant_id: UUID, agent_kind: str, revision_id: int, rollout_id: UUID
) -> None:
    """A completed rollout moves the pointer to its target and names itself."""
    await conn.execute(
        "UPDATE release SET revision_id = %s, rollout_id = %s, set_at = now(), set_by = NULL "
        "WHERE tenant_id = %s AND agent_kind = %s",
        (revision_id, rollout_id, tenant_id, agent_kind),
    )


async def set_release(
    conn: Conn, tenant_id: UUID, agent_kind: str, revision_id: int, set_by: UUID | None
) -> bool:
    """Move the pointer (rollout_id cleared); False when it already pointed there."""
    cur = await conn.execute(
        "INSERT INTO release (tenant_id, agent_kind, revision_id, set_by) "
        "VALUES (%s, %s, %s, %s) ON CONFLICT (tenant_id, agent_kind) DO UPDATE "
        "SET revision_id = excluded.revision_id, rollout_id = NULL, set_at = now(), "
        "set_by = excluded.set_by WHERE release.revision_id <> excluded.revision_id "
        "RETURNING revision_id",
        (tenant_id, agent_kind, revision_id, set_by),
    )
    return await cur.fetchone() is not None
