"""spec_revision (the part identity needs): r1, the empty tree every tenant starts with.

Revisions after r1 are written only by merges (docs/strataplane/architecture.md §2.2, §3.6).
"""

from __future__ import annotations

import hashlib
from uuid import UUID

from platformkit.db.scope import Conn

from strataplane.store import counters

EMPTY_TREE_HASH = hashlib.sha256(b"").digest()
INITIAL_MESSAGE = "Initial empty revision"


async def insert_initial_revision(conn: Conn, tenant_id: UUID) -> int:
    number = await counters.take(conn, tenant_id, "revision")
    await conn.execute(
        "INSERT INTO spec_revision (tenant_id, id, tree_hash, message, created_by) "
        "VALUES (%s, %s, %s, %s, NULL)",
        (tenant_id, number, EMPTY_TREE_HASH, INITIAL_MESSAGE),
    )
    return number
