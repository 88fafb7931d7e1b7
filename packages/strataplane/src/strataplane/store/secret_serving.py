"""What a secret delivery reads about the requesting agent: its kind, host labels, assurance
and bound identity, and the Secret names of the artifacts it was served or should run."""

from __future__ import annotations

from dataclasses import dataclass
from uuid import UUID

from platformkit.db.scope import Conn

from strataplane.store.rows import maybe


@dataclass(frozen=True)
class Recipient:
    kind: str
    labels: dict[str, str]
    assurance: str
    identity_subject: str | None
    identity_fingerprint: bytes | None
    secret_refs: frozenset[str]
    identity_anchor_id: UUID | None = None


async def recipient(conn: Conn, tenant_id: UUID, agent_id: UUID) -> Recipient | None:
    cur = await conn.execute(
        "SELECT a.kind::text AS kind, h.labels, a.assurance::text AS assurance, "
        "a.identity_subject, a.identity_fingerprint, a.identity_anchor_id, "
        "coalesce((SELECT array_agg(DISTINCT ref) FROM artifact r, unnest(r.secret_refs) ref "
        "WHERE r.tenant_id = a.tenant_id AND r.hash IN (a.desired_artifact, a.served_artifact)),"
        " '{}') AS refs FROM agent_instance a "
        "JOIN host h ON h.tenant_id = a.tenant_id AND h.id = a.host_id "
        "WHERE a.tenant_id = %s AND a.id = %s",
        (tenant_id, agent_id),
    )
    row = await maybe(cur)
    if row is None:
        return None
    fp = row["identity_fingerprint"]
    return Recipient(
        row["kind"],
        dict(row["labels"]),
        row["assurance"],
        row["identity_subject"],
        bytes(fp) if fp is not None else None,
        frozenset(row["refs"]),
        row["identity_anchor_id"],
    )
