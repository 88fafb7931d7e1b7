"""change_set_review, and the team facts that approvals are counted against
(docs/strataplane/architecture.md §3.5).

A review binds to the digest it was posted at and counts only while the change set still has
it; a reviewer's newest review at a digest replaces their earlier ones. Team slugs and current
memberships are read here because ApprovalPolicy rules and spec objects name teams by slug.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from uuid import UUID

from platformkit.db.scope import Conn

from strataplane.store.rows import Row, one

_COLUMNS = (
    "r.id, r.change_set_id, r.reviewer_id, u.display_name AS reviewer_name, r.decision, "
    "r.digest, r.acting_teams, r.comment, r.created_at"
)


@dataclass(frozen=True)
class Review:
    id: UUID
    change_set_id: UUID
    reviewer_id: UUID
    reviewer_name: str
    decision: str
    digest: bytes
    acting_teams: list[str]
    comment: str | None
    created_at: datetime


def _review(row: Row) -> Review:
    return Review(**{**row, "digest": bytes(row["digest"])})


async def insert_review(
    conn: Conn,
    tenant_id: UUID,
    review_id: UUID,
    *,
    change_set_id: UUID,
    reviewer_id: UUID,
    decision: str,
    digest: bytes,
    acting_teams: Sequence[str],
    comment: str | None,
) -> Review:
    cur = await conn.execute(
        "WITH r AS (INSERT INTO change_set_review (id, tenant_id, change_set_id, reviewer_id, "
        "decision, digest, acting_teams, comment) VALUES (%s, %s, %s, %s, %s, %s, %s, %s) "
        f"RETURNING *) SELECT {_COLUMNS} FROM r JOIN app_user u ON u.id = r.reviewer_id",
        (
            review_id,
            tenant_id,
            change_set_id,
            reviewer_id,
            decision,
            digest,
            sorted(set(acting_teams)),
            comment,
        ),
    )
    return _review(await one(cur))


async def list_reviews(conn: Conn, tenant_id: UUID, change_set_id: UUID) -> list[Review]:
    """Every review of the change set, oldest first."""
    cur = await conn.execute(
        f"SELECT {_COLUMNS} FROM change_set_review r JOIN app_user u ON u.id = r.reviewer_id "
        "WHERE r.tenant_id = %s AND r.change_set_id = %s ORDER BY r.created_at, r.id",
        (tenant_id, change_set_id),
    )
    return [_review(row) for row in await cur.fetchall()]


async def team_ids(conn: Conn, tenant_id: UUID) -> dict[str, UUID]:
    """Team slug -> id."""
    cur = await conn.execute("SELECT slug, id FROM team WHERE tenant_id = %s", (tenant_id,))
    return {r["slug"]: r["id"] for r in await cur.fetchall()}


async def team_members(conn: Conn, tenant_id: UUID) -> dict[str, set[UUID]]:
    """Team slug -> its current members."""
    cur = await conn.execute(
        "SELECT t.slug, m.user_id FROM team t JOIN team_member m "
        "ON m.tenant_id = t.tenant_id AND m.team_id = t.id WHERE t.tenant_id = %s",
        (tenant_id,),
    )
    found: dict[str, set[UUID]] = {}
    for r in await cur.fetchall():
        found.setdefault(r["slug"], set()).add(r["user_id"])
    return found
