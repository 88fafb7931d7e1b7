"""spec_revision: immutable, linear and gapless revisions r1, r2, ... per tenant
(docs/strataplane/architecture.md §2.2).

r1 (the empty tree) is written at tenant creation by ``store.spec``; every later revision by
exactly one merge, which takes the number from tenant_counter 'revision' in its transaction.
The change set behind rN is the one whose merged_revision_id is N.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from uuid import UUID

from platformkit.db.scope import Conn

from strataplane.store.rows import Row, maybe, one

_SELECT = (
    "SELECT r.id, r.tree_hash, r.message, r.created_by, r.created_at, "
    "cs.id AS change_set_id, cs.number AS change_set_number "
    "FROM spec_revision r LEFT JOIN change_set cs "
    "ON cs.tenant_id = r.tenant_id AND cs.merged_revision_id = r.id "
)


@dataclass(frozen=True)
class Revision:
    id: int
    tree_hash: bytes
    message: str
    created_by: UUID | None
    created_at: datetime
    change_set_id: UUID | None
    change_set_number: int | None


def _revision(row: Row) -> Revision:
    return Revision(**{**row, "tree_hash": bytes(row["tree_hash"])})


async def latest_id(conn: Conn, tenant_id: UUID) -> int:
    """The latest revision number (every tenant has r1)."""
    cur = await conn.execute(
        "SELECT max(id) AS n FROM spec_revision WHERE tenant_id = %s", (tenant_id,)
    )
    return int((await one(cur))["n"] or 0)


async def get_revision(conn: Conn, tenant_id: UUID, number: int) -> Revision | None:
    cur = await conn.execute(_SELECT + "WHERE r.tenant_id = %s AND r.id = %s", (tenant_id, number))
    row = await maybe(cur)
    return _revision(row) if row is not None else None


async def list_revisions(
    conn: Conn, tenant_id: UUID, *, before: int | None, limit: int
) -> list[Revision]:
    """Newest first; keyset pagination on the number."""
    cur = await conn.execute(
        _SELECT + "WHERE r.tenant_id = %(t)s AND (%(before)s::bigint IS NULL OR r.id < %(before)s) "
        "ORDER BY r.id DESC LIMIT %(limit)s",
        {"t": tenant_id, "before": before, "limit": limit},
    )
    return [_revision(row) for row in await cur.fetchall()]


async def insert_revision(
    conn: Conn,
    tenant_id: UUID,
    number: int,
    *,
    tree_hash: bytes,
    message: str,
    created_by: UUID | None,
) -> None:
    await conn.execute(
        "INSERT INTO spec_revision (tenant_id, id, tree_hash, message, created_by) "
        "VALUES (%s, %s, %s, %s, %s)",
        (tenant_id, number, tree_hash, message, created_by),
    )
