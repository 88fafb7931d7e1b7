"""artifact (content-addressed rendered bytes, zstd at rest) and change_set_impact."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from uuid import UUID

from platformkit.db.scope import Conn

from strataplane.render.artifacts import Artifact, compress, decompress


async def store_artifacts(
    conn: Conn, tenant_id: UUID, arts: Sequence[tuple[str, Artifact]]
) -> None:
    """Insert each (agent kind, artifact) once, in one round trip; a render that produced the
    same bytes again only marks it used."""
    if not arts:
        return
    rows = [
        (tenant_id, art.hash, kind, compress(art.content), list(art.secret_refs), art.size)
        for kind, art in arts
    ]
    async with conn.cursor() as cur:
        await cur.executemany(
            "INSERT INTO artifact (tenant_id, hash, agent_kind, content, secret_refs, size) "
            "VALUES (%s, %b, %s, %b, %s, %s) ON CONFLICT (tenant_id, hash) DO UPDATE "
            "SET last_used_at = now() WHERE artifact.last_used_at < now() - interval '1 hour'",
            rows,
        )


async def get_artifacts(
    conn: Conn, tenant_id: UUID, digests: Sequence[bytes]
) -> dict[bytes, Artifact]:
    cur = await conn.execute(
        "SELECT hash, content, secret_refs FROM artifact WHERE tenant_id = %s AND hash = ANY(%b)",
        (tenant_id, list(digests)),
    )
    found = {}
    for row in await cur.fetchall():
        digest = bytes(row["hash"])
        content = decompress(bytes(row["content"]))
        found[digest] = Artifact(digest, content, tuple(row["secret_refs"]))
    return found


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
        "unnest(%b::uuid[], %b::bytea[], %b::bytea[])",
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


async def impact_count(conn: Conn, tenant_id: UUID, change_set_id: UUID, agent_kind: str) -> int:
    cur = await conn.execute(
        "SELECT count(*) AS n FROM change_set_impact i JOIN agent_instance a "
        "ON a.tenant_id = i.tenant_id AND a.id = i.agent_instance_id "
        "WHERE i.tenant_id = %s AND i.change_set_id = %s AND a.kind::text = %s",
        (tenant_id, change_set_id, agent_kind),
    )
    row = await cur.fetchone()
    return int(row["n"]) if row is not None else 0


async def impact_host_labels(
    conn: Conn, tenant_id: UUID, change_set_id: UUID
) -> list[dict[str, str]]:
    """The effective labels of the host of each agent in the change set's impact set."""
    cur = await conn.execute(
        "SELECT h.labels FROM change_set_impact i JOIN agent_instance a "
        "ON a.tenant_id = i.tenant_id AND a.id = i.agent_instance_id "
        "JOIN host h ON h.tenant_id = a.tenant_id AND h.id = a.host_id "
        "WHERE i.tenant_id = %s AND i.change_set_id = %s",
        (tenant_id, change_set_id),
    )
    return [dict(r["labels"]) for r in await cur.fetchall()]


async def impact_agents(
    conn: Conn, tenant_id: UUID, change_set_id: UUID, limit: int
) -> list[dict[str, Any]]:
    """The agents of the change set's impact set with their artifact before and after (None
    after: the render fails), and their host's owner and labels for the reader's scope."""
    cur = await conn.execute(
        "SELECT a.id, a.external_id, a.kind::text AS kind, a.version, i.before_artifact, "
        "i.after_artifact, h.name AS host, h.owner_team_id AS owner, h.labels "
        "FROM change_set_impact i JOIN agent_instance a "
        "ON a.tenant_id = i.tenant_id AND a.id = i.agent_instance_id "
        "JOIN host h ON h.tenant_id = a.tenant_id AND h.id = a.host_id "
        "WHERE i.tenant_id = %s AND i.change_set_id = %s ORDER BY a.external_id, a.id LIMIT %s",
        (tenant_id, change_set_id, limit),
    )
    return [dict(r) for r in await cur.fetchall()]
