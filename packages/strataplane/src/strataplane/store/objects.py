"""spec_object: the object index with validity ranges (docs/strataplane/architecture.md §2.3,
§3.10).

A row is one content of one object over revisions ``[valid_from, valid_to)``; unchanged
objects are never copied per revision, so the tree at revision N is one range query
(``TREE_AT``) and history is read from the ranges. Only a merge writes here: it closes the
ranges of changed and deleted paths and opens those of written ones, in the transaction that
creates the revision.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from uuid import UUID

from platformkit.db.scope import Conn
from psycopg.types.json import Jsonb

from strataplane.domain.spec.index import IndexColumns

_AT = "valid_from <= %(n)s AND (valid_to IS NULL OR valid_to > %(n)s)"
TREE_AT = (
    "SELECT path, kind, name, blob_hash, owner_team FROM spec_object "
    f'WHERE tenant_id = %(t)s AND {_AT} ORDER BY path COLLATE "C"'
)
_CONTENTS_AT = (
    "SELECT o.path, o.blob_hash, b.content FROM spec_object o JOIN spec_blob b "
    "ON b.tenant_id = o.tenant_id AND b.hash = o.blob_hash WHERE o.tenant_id = %(t)s "
    "AND o.valid_from <= %(n)s AND (o.valid_to IS NULL OR o.valid_to > %(n)s) "
)


@dataclass(frozen=True)
class TreeEntry:
    path: str
    kind: str
    name: str
    blob_hash: bytes
    owner_team: str


@dataclass(frozen=True)
class PathVersion:
    """One version of a file: its content over ``[valid_from, valid_to)``."""

    valid_from: int
    valid_to: int | None
    blob_hash: bytes
    message: str
    created_by: UUID | None
    created_at: datetime
    change_set: int | None


async def tree_at(conn: Conn, tenant_id: UUID, number: int) -> list[TreeEntry]:
    """Every object of revision ``number``, by path in byte order: one range query."""
    cur = await conn.execute(TREE_AT, {"t": tenant_id, "n": number})
    return [TreeEntry(**{**r, "blob_hash": bytes(r["blob_hash"])}) for r in await cur.fetchall()]


async def contents_at(
    conn: Conn, tenant_id: UUID, number: int, *, kinds: Sequence[str] | None = None
) -> dict[str, bytes]:
    """Path -> canonical content at revision ``number`` (only ``kinds`` when given)."""
    query = _CONTENTS_AT + ("AND o.kind = ANY(%(k)s)" if kinds is not None else "")
    cur = await conn.execute(query, {"t": tenant_id, "n": number, "k": list(kinds or ())})
    return {r["path"]: bytes(r["content"]) for r in await cur.fetchall()}


async def file_at(
    conn: Conn, tenant_id: UUID, path: str, number: int
) -> tuple[bytes, bytes] | None:
    """(blob hash, content) of ``path`` at revision ``number``, None when absent there."""
    cur = await conn.execute(
        _CONTENTS_AT + "AND o.path = %(p)s", {"t": tenant_id, "p": path, "n": number}
    )
    row = await cur.fetchone()
    return (bytes(row["blob_hash"]), bytes(row["content"])) if row is not None else None


async def owners_at(
    conn: Conn, tenant_id: UUID, number: int, paths: Iterable[str]
) -> dict[str, str]:
    """Path -> owner team slug of those of ``paths`` that exist at revision ``number``."""
    cur = await conn.execute(
        "SELECT path, owner_team FROM spec_object WHERE tenant_id = %(t)s "
        f"AND path = ANY(%(p)s) AND {_AT}",
        {"t": tenant_id, "n": number, "p": sorted(set(paths))},
    )
    return {r["path"]: r["owner_team"] for r in await cur.fetchall()}


async def close_paths(conn: Conn, tenant_id: UUID, number: int, paths: Iterable[str]) -> int:
    """End the current ranges of ``paths`` at revision ``number``; the count of rows closed."""
    cur = await conn.execute(
        "UPDATE spec_object SET valid_to = %s "
        "WHERE tenant_id = %s AND valid_to IS NULL AND path = ANY(%s)",
        (number, tenant_id, sorted(paths)),
    )
    return cur.rowcount


async def open_objects(
    conn: Conn, tenant_id: UUID, number: int, objects: Sequence[IndexColumns]
) -> None:
    """Start a range at revision ``number`` for each written object."""
    if not objects:
        return
    async with conn.cursor() as cur:
        await cur.executemany(
            "INSERT INTO spec_object (tenant_id, kind, name, path, blob_hash, owner_team, "
            "agent_kind, agent_versions, precedence, selector, valid_from) "
            "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
            [
                (
                    tenant_id,
                    o.kind,
                    o.name,
                    o.path,
                    o.blob_hash,
                    o.owner_team,
                    o.agent_kind,
                    o.agent_versions,
                    o.precedence,
                    Jsonb(o.selector) if o.selector is not None else None,
                    number,
                )
                for o in objects
            ],
        )


async def path_log(conn: Conn, tenant_id: UUID, path: str) -> list[PathVersion]:
    """The versions of one file, newest first (index spec_object_path)."""
    cur = await conn.execute(
        "SELECT o.valid_from, o.valid_to, o.blob_hash, r.message, r.created_by, r.created_at, "
        "cs.number AS change_set FROM spec_object o "
        "JOIN spec_revision r ON r.tenant_id = o.tenant_id AND r.id = o.valid_from "
        "LEFT JOIN change_set cs ON cs.tenant_id = o.tenant_id "
        "AND cs.merged_revision_id = o.valid_from "
        "WHERE o.tenant_id = %s AND o.path = %s ORDER BY o.valid_from DESC",
        (tenant_id, path),
    )
    return [PathVersion(**{**r, "blob_hash": bytes(r["blob_hash"])}) for r in await cur.fetchall()]


async def diff_revisions(
    conn: Conn, tenant_id: UUID, a: int, b: int
) -> list[tuple[str, bytes | None, bytes | None]]:
    """(path, hash at ``a``, hash at ``b``) of every path that differs, for ``a`` < ``b``:
    only rows whose range starts or ends in (a, b] can differ."""
    cur = await conn.execute(
        """
        WITH touched AS (
          SELECT DISTINCT path FROM spec_object WHERE tenant_id = %(t)s
            AND ((valid_from > %(a)s AND valid_from <= %(b)s)
              OR (valid_to > %(a)s AND valid_to <= %(b)s))
        ),
        at_a AS (
          SELECT path, blob_hash FROM spec_object WHERE tenant_id = %(t)s
            AND path IN (SELECT path FROM touched)
            AND valid_from <= %(a)s AND (valid_to IS NULL OR valid_to > %(a)s)
        ),
        at_b AS (
          SELECT path, blob_hash FROM spec_object WHERE tenant_id = %(t)s
            AND path IN (SELECT path FROM touched)
            AND valid_from <= %(b)s AND (valid_to IS NULL OR valid_to > %(b)s)
        )
        SELECT path, at_a.blob_hash AS old_hash, at_b.blob_hash AS new_hash
        FROM at_a FULL JOIN at_b USING (path)
        WHERE at_a.blob_hash IS DISTINCT FROM at_b.blob_hash
        ORDER BY path COLLATE "C"
        """,
        {"t": tenant_id, "a": a, "b": b},
    )

    def raw(value: object) -> bytes | None:
        return bytes(value) if isinstance(value, bytes | memoryview) else None

    return [(r["path"], raw(r["old_hash"]), raw(r["new_hash"])) for r in await cur.fetchall()]
