"""Short-lived copies of the rows the send path reads for every message: the sender's signing
key (by key id), the tenant, and the recipient (by address).

Each row is kept for ``DIRECTORY_TTL_S`` seconds per process, the same bound as the agent state
behind a credential (``principals``): revoking a key, disabling or deleting an agent, or changing
a tenant takes effect on every instance within a second. Rows that were not found are never
kept, so a new agent or key is usable at once. The cache is bounded.

A send asks for the rows its envelopes need before its transaction opens (``prefetch``): the
misses of sends that come together are read in one transaction of their own
(``Gathered``), since with many agents each sending now and then nearly every send finds
its copies expired. A row that is still missing inside the transaction (expired in between, or
never asked for) is read there, on the caller's connection, under its RLS scope.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Awaitable, Callable, Hashable, Iterable
from typing import Any

from platformkit.db.scope import Conn, Pool

from agentbus.db import pipelined_transaction
from agentbus.gateway.store import agents
from agentbus.gathered import Gathered
from agentbus.store import tenants

DIRECTORY_TTL_S = 1.0
_MAX_ENTRIES = 10000
Row = dict[str, Any]
Wanted = tuple[str, Hashable]
"""What a send needs: ("tenant", None), ("key", key id) or ("address", address)."""


class Directory:
    def __init__(self, pool: Pool, ttl_s: float = DIRECTORY_TTL_S) -> None:
        self.ttl_s = ttl_s
        self._pool = pool
        self._rows: dict[tuple[uuid.UUID, str, Hashable], tuple[float, Row]] = {}
        self.gathered: Gathered[Wanted, Row] = Gathered(self._read)

    async def prefetch(
        self, tenant_id: uuid.UUID, key_ids: Iterable[uuid.UUID], addresses: Iterable[str]
    ) -> None:
        """Have the tenant, these keys and these recipients at hand for a send (see the module
        docstring); what is at hand already costs nothing."""
        now = time.monotonic()
        wanted = [
            thing
            for thing in dict.fromkeys(
                [
                    ("tenant", None),
                    *(("key", k) for k in key_ids),
                    *(("address", a) for a in addresses),
                ]
            )
            if not self._fresh((tenant_id, *thing), now)
        ]
        if not wanted:
            return
        rows = await asyncio.gather(*(self.gathered.ask(tenant_id, thing) for thing in wanted))
        for thing, row in zip(wanted, rows, strict=True):
            if row is not None:
                self._keep((tenant_id, *thing), row, now)

    async def _read(self, tenant_id: uuid.UUID, wanted: list[Wanted]) -> dict[Wanted, Row]:
        """The wanted rows of one tenant, in one transaction and one round trip."""
        key_ids = [k for kind, k in wanted if kind == "key" and isinstance(k, uuid.UUID)]
        addresses = [a for kind, a in wanted if kind == "address" and isinstance(a, str)]
        found: dict[Wanted, Row] = {}
        async with pipelined_transaction(self._pool, tenant_id) as conn:
            tenant = await tenants.tenant_cursor(conn, tenant_id)
            keys = await agents.keys_cursor(conn, tenant_id, key_ids) if key_ids else None
            named = (
                await agents.by_address_cursor(conn, tenant_id, addresses) if addresses else None
            )
            if (row := await tenant.fetchone()) is not None:
                found["tenant", None] = row
            for row in await keys.fetchall() if keys is not None else []:
                found["key", row["id"]] = row
            for row in await named.fetchall() if named is not None else []:
                found["address", row["address"]] = row
        return found

    def _fresh(self, entry: tuple[uuid.UUID, str, Hashable], now: float) -> bool:
        hit = self._rows.get(entry)
        return hit is not None and hit[0] > now

    def _keep(self, entry: tuple[uuid.UUID, str, Hashable], row: Row, now: float) -> None:
        if len(self._rows) >= _MAX_ENTRIES:
            self._rows.clear()
        self._rows[entry] = (now + self.ttl_s, row)

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
        self._keep(entry, row, now)
        return row

    async def key(self, conn: Conn, tenant_id: uuid.UUID, key_id: uuid.UUID) -> Row | None:
        """An ``agent_keys`` row (``revoked_at`` and ``expires_at`` are for the caller)."""
        return await self._row(
            tenant_id, "key", key_id, lambda: agents.get_key(conn, tenant_id, key_id)
        )

    async def keys(
        self, conn: Conn, tenant_id: uuid.UUID, key_ids: Iterable[uuid.UUID]
    ) -> dict[uuid.UUID, Row]:
        """``key`` for several ids: those at hand, and the rest read by one statement on
        ``conn`` (a pull's sender keys)."""
        now = time.monotonic()
        found: dict[uuid.UUID, Row] = {}
        missing = []
        for key_id in set(key_ids):
            hit = self._rows.get((tenant_id, "key", key_id))
            if hit is not None and hit[0] > now:
                found[key_id] = hit[1]
            else:
                missing.append(key_id)
        if missing:
            for row in await (await agents.keys_cursor(conn, tenant_id, missing)).fetchall():
                found[row["id"]] = row
                self._keep((tenant_id, "key", row["id"]), row, now)
        return found

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
