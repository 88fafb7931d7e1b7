"""blobs (data model §1.9): claim-check objects, sealed like payloads, referenced from message
attachments. SQL only, on a connection inside the tenant's scope."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from platformkit.db.scope import Conn

Row = dict[str, Any]
_COLUMNS = """id, tenant_id, uploaded_by, s3_key, content_type, size_bytes, sha256, dek_version,
    ref_count, expires_at, created_at"""


async def insert_blob(conn: Conn, values: Row) -> Row:
    cur = await conn.execute(
        f"""INSERT INTO blobs (id, tenant_id, uploaded_by, s3_key, content_type, size_bytes,
                               sha256, dek_version, expires_at)
            VALUES (%(id)s, %(tenant_id)s, %(uploaded_by)s, %(s3_key)s, %(content_type)s,
                    %(size_bytes)s, %(sha256)s, %(dek_version)s, %(expires_at)s)
            RETURNING {_COLUMNS}""",
        values,
    )
    row = await cur.fetchone()
    assert row is not None
    return row


async def get_blob(conn: Conn, tenant_id: uuid.UUID, blob_id: uuid.UUID) -> Row | None:
    cur = await conn.execute(
        f"SELECT {_COLUMNS} FROM blobs WHERE tenant_id = %s AND id = %s", (tenant_id, blob_id)
    )
    return await cur.fetchone()


async def lock_live(
    conn: Conn, tenant_id: uuid.UUID, ids: Sequence[uuid.UUID]
) -> dict[uuid.UUID, int]:
    """The sizes by id of the tenant's blobs among ``ids`` not past ``expires_at`` at the
    transaction's time, locked until it ends (retention cannot delete them meanwhile)."""
    cur = await conn.execute(
        """SELECT id, size_bytes FROM blobs
            WHERE tenant_id = %s AND id = ANY(%s) AND expires_at > now()
            ORDER BY id FOR UPDATE""",
        (tenant_id, list(ids)),
    )
    return {row["id"]: int(row["size_bytes"]) for row in await cur.fetchall()}


async def reference(
    conn: Conn, tenant_id: uuid.UUID, ids: Sequence[uuid.UUID], kept_until: datetime
) -> set[uuid.UUID]:
    """One more reference to each blob that is still live at the statement's time, kept at
    least until ``kept_until`` (the referencing message's retention end); the ids counted."""
    cur = await conn.execute(
        """UPDATE blobs SET ref_count = ref_count + 1, expires_at = GREATEST(expires_at, %s)
            WHERE tenant_id = %s AND id = ANY(%s) AND expires_at > now()
        RETURNING id""",
        (kept_until, tenant_id, list(ids)),
    )
    return {row["id"] for row in await cur.fetchall()}


async def delete_any(conn: Conn, tenant_id: uuid.UUID, limit: int) -> list[str]:
    """Up to ``limit`` of the tenant's blobs, whatever their ``expires_at`` (a tenant being
    deleted); their object keys."""
    cur = await conn.execute(
        """DELETE FROM blobs b USING (
               SELECT id FROM blobs WHERE tenant_id = %(t)s LIMIT %(limit)s) AS doomed
            WHERE b.tenant_id = %(t)s AND b.id = doomed.id
        RETURNING b.s3_key""",
        {"t": tenant_id, "limit": limit},
    )
    return [row["s3_key"] for row in await cur.fetchall()]


async def delete_expired(conn: Conn, tenant_id: uuid.UUID, limit: int) -> list[str]:
    """Up to ``limit`` of the tenant's blobs past ``expires_at``, deleted; their object keys.
    The target row's ``expires_at`` is checked again: a send that attached the blob meanwhile
    (and held its lock) has moved it on, and the row stays."""
    cur = await conn.execute(
        """DELETE FROM blobs b USING (
               SELECT id FROM blobs WHERE tenant_id = %(t)s AND expires_at < now()
                ORDER BY expires_at LIMIT %(limit)s) AS doomed
            WHERE b.tenant_id = %(t)s AND b.id = doomed.id AND b.expires_at < now()
        RETURNING b.s3_key""",
        {"t": tenant_id, "limit": limit},
    )
    return [row["s3_key"] for row in await cur.fetchall()]
