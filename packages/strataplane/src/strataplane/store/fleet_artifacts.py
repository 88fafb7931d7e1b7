"""artifact (content-addressed rendered bytes, zstd at rest) and change_set_impact."""

from __future__ import annotations

from collections.abc import Sequence
from uuid import UUID

from platformkit.db.scope import Conn

from strataplane.render.artifacts import Artifact, compress, decompress


async def store_artifact(conn: Conn, tenant_id: UUID, agent_kind: str, art: Artifact) -> None:
    """Insert once; a render that produced the same bytes again only marks it used."""
    await conn.execute(
        "INSERT INTO artifact (tenant_id, hash, agent_kind, content, secret_refs, size) "
        "VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (tenant_id, hash) DO UPDATE "
        "SET last_used_at = now() WHERE artifact.last_used_at < now() - interval '1 hour'",
        (tenant_id, art.hash, agent_kind, compress(art.content), list(art.secret_refs), art.size),
    )


async def get_artifact(conn: Conn, tenant_id: UUID, digest: bytes) -> Artifact | None:
    cur = await conn.execute(
        "SELECT content, secret_refs FROM artifact WHERE tenant_id = %s AND hash = %s",
        (tenant_id, digest),
    )
    row = await cur.fetchone()
    if row is None:
        return None
    return Artifact(digest, decompress(bytes(row["content"])), tuple(row["secret_refs"]))


async def artifact_exists(conn: Conn, tenant_id: UUID, digest: bytes) -> bool:
    cur = await conn.execute(
        "SELECT 1 FROM artifact WHERE tenant_id = %s AND hash = %s", (tenant_id, digest)
    )
    return await cur.fetchone() is not None


async def replace_impact(
    conn: Conn,
    tenant_id: UUID,
    change_set_id: UUID,
    rows: Sequence[tuple[UUID, bytes | None, bytes | None]],
) -> None:
    """The change set's impact set is exactly ``rows`` (agent, before, after)."""
    await delete_impact(conn, tenant_id, change_set_id)
    if not rows:
        return
    # COPY is refused under row-level security: one INSERT over arrays instead
    await conn.execute(
        "INSERT INTO change_set_impact (tenant_id, change_set_id, agent_instance_id, "
        "before_artifact, after_artifact) SELECT %s, %s, * FROM "
        "unnest(%s::uuid[], %s::bytea[], %s::bytea[])",
        (
            tenant_id,
            change_set_id,
            [r[0] for r in rows],
            [r[1] for r in rows],
            [r[2] for r in rows],
        ),
    )


async def delete_impact(conn: Conn, tenant_id: UUID, change_set_id: UUID) -> None:
    await conn.execute(
        "DELETE FROM change_set_impact WHERE tenant_id = %s AND change_set_id = %s",
        (tenant_id, change_set_id),
    )
