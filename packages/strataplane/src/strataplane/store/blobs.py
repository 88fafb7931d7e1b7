"""spec_blob: canonical file contents, content-addressed within the tenant
(docs/strataplane/architecture.md §2.1).

Two equal files of one tenant share a row; another tenant with the same file has its own, so no
query can discover another tenant's content by hash. Blobs are deleted only with their tenant.
"""

from __future__ import annotations

from collections.abc import Iterable
from uuid import UUID

from platformkit.db.scope import Conn

from strataplane.domain.spec.canonical import blob_hash


async def put_blob(conn: Conn, tenant_id: UUID, content: bytes) -> bytes:
    """Store canonical ``content`` (once per tenant) and return its hash."""
    digest = blob_hash(content)
    await conn.execute(
        "INSERT INTO spec_blob (tenant_id, hash, content) VALUES (%s, %s, %s) "
        "ON CONFLICT (tenant_id, hash) DO NOTHING",
        (tenant_id, digest, content),
    )
    return digest


def _checked(digest: bytes, content: bytes) -> bytes:
    # The hash is the address: a row whose content no longer hashes to it is corrupt, and
    # serving it would silently change the spec. Skipped only under python -O.
    if __debug__ and blob_hash(content) != digest:
        raise ValueError(f"spec_blob {digest.hex()} does not hash to its address")
    return content


async def get_blobs(conn: Conn, tenant_id: UUID, hashes: Iterable[bytes]) -> dict[bytes, bytes]:
    """Contents by hash; hashes the tenant does not have are absent from the result."""
    wanted = sorted(set(hashes))
    if not wanted:
        return {}
    cur = await conn.execute(
        "SELECT hash, content FROM spec_blob WHERE tenant_id = %s AND hash = ANY(%s)",
        (tenant_id, wanted),
    )
    rows = await cur.fetchall()
    return {bytes(r["hash"]): _checked(bytes(r["hash"]), bytes(r["content"])) for r in rows}


async def get_blob(conn: Conn, tenant_id: UUID, digest: bytes) -> bytes | None:
    return (await get_blobs(conn, tenant_id, [digest])).get(digest)
