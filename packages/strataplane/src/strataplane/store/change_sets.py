"""change_set and change_set_file: proposed edits of the spec, a base revision plus an overlay
(docs/strataplane/architecture.md §3).

The overlay has one row per changed path: ``blob_hash`` the new content (NULL = deletion) and
``base_hash`` the blob at the base revision (NULL = a new file). Every writer locks the change
set row first (``get_change_set(..., lock=True)``); rules live in the actions.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

from platformkit.db.scope import Conn
from psycopg import sql
from psycopg.types.json import Jsonb

from strataplane.domain.merge import Row as OverlayRow
from strataplane.store.rows import Row, maybe, one

_COLUMNS = (
    "id, tenant_id, number, title, description, author_id, assistant_chat_id, "
    "base_revision_id, state::text AS state, digest, validated_digest, validation, impact, "
    "requirements, reverts_revision_id, merged_revision_id, created_at, updated_at, "
    "submitted_at, merged_at, closed_at"
)
# Columns ``update_change_set`` may set; the JSON ones are wrapped as jsonb.
_UPDATABLE = {
    "title",
    "description",
    "base_revision_id",
    "state",
    "digest",
    "validated_digest",
    "validation",
    "impact",
    "requirements",
    "merged_revision_id",
    "submitted_at",
    "merged_at",
    "closed_at",
}
_JSON = {"validation", "impact", "requirements"}
NOW = object()  # a value for timestamp columns: the transaction's now()


@dataclass(frozen=True)
class ChangeSet:
    id: UUID
    tenant_id: UUID
    number: int
    title: str
    description: str
    author_id: UUID
    assistant_chat_id: UUID | None
    base_revision_id: int
    state: str
    digest: bytes
    validated_digest: bytes | None
    validation: Any
    impact: Any
    requirements: Any
    reverts_revision_id: int | None
    merged_revision_id: int | None
    created_at: datetime
    updated_at: datetime
    submitted_at: datetime | None
    merged_at: datetime | None
    closed_at: datetime | None

    @property
    def validated(self) -> bool:
        """A successful validation of the current digest exists."""
        return self.validated_digest == self.digest


def _cs(row: Row) -> ChangeSet:
    vd = row["validated_digest"]
    return ChangeSet(
        **{**row, "digest": bytes(row["digest"]), "validated_digest": vd and bytes(vd)}
    )


async def insert_change_set(
    conn: Conn,
    tenant_id: UUID,
    cs_id: UUID,
    *,
    number: int,
    title: str,
    description: str,
    author_id: UUID,
    base_revision_id: int,
    digest: bytes,
    reverts_revision_id: int | None = None,
) -> ChangeSet:
    cur = await conn.execute(
        "INSERT INTO change_set (id, tenant_id, number, title, description, author_id, "
        "base_revision_id, digest, reverts_revision_id) "
        f"VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s) RETURNING {_COLUMNS}",
        (
            cs_id,
            tenant_id,
            number,
            title,
            description,
            author_id,
            base_revision_id,
            digest,
            reverts_revision_id,
        ),
    )
    return _cs(await one(cur))


async def get_change_set(
    conn: Conn, tenant_id: UUID, ref: UUID | int, *, lock: bool = False
) -> ChangeSet | None:
    """By id, or by number (``CS-<number>``); ``lock`` takes the row lock every writer takes."""
    column = "number" if isinstance(ref, int) else "id"
    cur = await conn.execute(
        f"SELECT {_COLUMNS} FROM change_set WHERE tenant_id = %s AND {column} = %s"
        + (" FOR UPDATE" if lock else ""),
        (tenant_id, ref),
    )
    row = await maybe(cur)
    return _cs(row) if row is not None else None


async def list_change_sets(
    conn: Conn, tenant_id: UUID, *, state: str | None, before: int | None, limit: int
) -> list[ChangeSet]:
    """Newest first; keyset pagination on the number."""
    cur = await conn.execute(
        f"SELECT {_COLUMNS} FROM change_set WHERE tenant_id = %(t)s "
        "AND (%(state)s::text IS NULL OR state::text = %(state)s) "
        "AND (%(before)s::bigint IS NULL OR number < %(before)s) "
        "ORDER BY number DESC LIMIT %(limit)s",
        {"t": tenant_id, "state": state, "before": before, "limit": limit},
    )
    return [_cs(row) for row in await cur.fetchall()]


async def update_change_set(
    conn: Conn, tenant_id: UUID, cs_id: UUID, fields: Mapping[str, Any]
) -> ChangeSet:
    """Set ``fields`` (``NOW`` for now()) and ``updated_at``; the row must exist."""
    unknown = set(fields) - _UPDATABLE
    if unknown:
        raise ValueError(f"not updatable: {sorted(unknown)}")
    sets: list[sql.Composable] = [sql.SQL("updated_at = now()")]
    params: list[Any] = []
    for name, value in fields.items():
        if value is NOW:
            sets.append(sql.SQL("{} = now()").format(sql.Identifier(name)))
            continue
        cast = "::change_set_state" if name == "state" else ""
        sets.append(sql.SQL("{} = %s" + cast).format(sql.Identifier(name)))
        params.append(Jsonb(value) if name in _JSON and value is not None else value)
    query = sql.SQL("UPDATE change_set SET {} WHERE tenant_id = %s AND id = %s RETURNING ")
    cur = await conn.execute(
        query.format(sql.SQL(", ").join(sets)) + sql.SQL(_COLUMNS), (*params, tenant_id, cs_id)
    )
    return _cs(await one(cur))


async def overlay(conn: Conn, tenant_id: UUID, cs_id: UUID) -> dict[str, OverlayRow]:
    """The overlay rows by path, in byte order."""
    cur = await conn.execute(
        "SELECT path, blob_hash, base_hash FROM change_set_file "
        'WHERE tenant_id = %s AND change_set_id = %s ORDER BY path COLLATE "C"',
        (tenant_id, cs_id),
    )

    def raw(value: bytes | None) -> bytes | None:
        return bytes(value) if value is not None else None

    return {
        r["path"]: OverlayRow(raw(r["blob_hash"]), raw(r["base_hash"]))
        for r in await cur.fetchall()
    }


async def put_file(conn: Conn, tenant_id: UUID, cs_id: UUID, path: str, row: OverlayRow) -> None:
    await conn.execute(
        "INSERT INTO change_set_file (tenant_id, change_set_id, path, blob_hash, base_hash) "
        "VALUES (%s, %s, %s, %s, %s) ON CONFLICT (change_set_id, path) DO UPDATE SET "
        "blob_hash = excluded.blob_hash, base_hash = excluded.base_hash, updated_at = now()",
        (tenant_id, cs_id, path, row.blob_hash, row.base_hash),
    )


async def delete_file(conn: Conn, tenant_id: UUID, cs_id: UUID, path: str) -> bool:
    cur = await conn.execute(
        "DELETE FROM change_set_file WHERE tenant_id = %s AND change_set_id = %s AND path = %s",
        (tenant_id, cs_id, path),
    )
    return cur.rowcount == 1


async def replace_overlay(
    conn: Conn, tenant_id: UUID, cs_id: UUID, rows: Mapping[str, OverlayRow]
) -> None:
    """Make the overlay exactly ``rows`` (a rebase, or a new revert or restore)."""
    await conn.execute(
        "DELETE FROM change_set_file WHERE tenant_id = %s AND change_set_id = %s",
        (tenant_id, cs_id),
    )
    for path, row in rows.items():
        await put_file(conn, tenant_id, cs_id, path, row)
