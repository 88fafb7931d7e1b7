"""Short-lived copies of the rows the send path reads for every message: the sender's signing
key (by key id), the tenant, and the recipient (by address).

Each row is read inside the caller's tenant transaction (RLS applies) on a miss and kept for
``DIRECTORY_TTL_S`` seconds per process, the same bound as the agent state behind a credential
(``principals``): revoking a key, disabling or deleting an agent, or changing a tenant takes
effect on every instance within a second. Rows that were not found are never kept, so a new
agent or key is usable at once. The cache is bounded.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Awaitable, Callable, Hashable
from typing import Any

from platformkit.db.scope import Conn

from agentbus.gateway.store import agents
from agentbus.store import tenants

DIRECTORY_TTL_S = 1.0
_MAX_ENTRIES = 10000
Row = dict[str, Any]


class Directory:
    def __init__(self, ttl_s: float = DIRECTORY_TTL_S) -> None:
        self.ttl_s = ttl_s
        self._rows: dict[tuple[uuid.UUID, str, Hashable], tuple[float, Row]] = {}

    async def _row(
        self,
        tenant_id: uuid.UUID,
        kind: str,
        key: Hashable,
        read: Callable[[], Awaitable[Row | None]],
    ) -> Row | None:
        entry = (tenant_id, kind, key)
        now = time.monotonic()
        hit = self._rows.get(entry)
        if hit is not None and hit[0] > now:
            return hit[1]
        row = await read()
        if row is None:
            self._rows.pop(entry, None)
            return None
        if len(self._rows) >= _MAX_ENTRIES:
            self._rows.clear()
        self._rows[entry] = (now + self.ttl_s, row)
        return row

    async def key(self, conn: Conn, tenant_id: uuid.UUID, key_id: uuid.UUID) -> Row | None:
        """An ``agent_keys`` row (``revoked_at`` and ``expires_at`` are for the caller)."""
        return await self._row(
            tenant_id, "key", key_id, lambda: agents.get_key(conn, tenant_id, key_id)
        )

    async def tenant(self, conn: Conn, tenant_id: uuid.UUID) -> Row | None:
        return await self._row(
            tenant_id, "tenant", None, lambda: tenants.get_tenant(conn, tenant_id)
        )

    async def agent_by_address(self, conn: Conn, tenant_id: uuid.UUID, address: str) -> Row | None:
        """A live agent (status and visibility are for the caller)."""
        return await self._row(
            tenant_id,
            "address",
            address,
            lambda: agents.agent_by_address(conn, tenant_id, address),
        )
