"""A claimed key: the open transaction holding its row, finished when the response is known.

The capture middleware puts an empty :class:`Slot` in the ASGI scope of every request; claiming
a key fills it; the middleware then hands the response to :meth:`Claim.finish`, which stores a
complete 2xx response and commits, or rolls the claim back for anything else.
"""

from __future__ import annotations

from contextlib import AsyncExitStack
from dataclasses import dataclass, field

import psycopg
from psycopg import sql

from platformkit.http.idempotency import store

__all__ = ["SCOPE_KEY", "STORED_HEADERS", "Claim", "Slot"]

SCOPE_KEY = "platformkit.idempotency"
STORED_HEADERS = ("content-type", "etag", "location")


@dataclass
class Claim:
    stack: AsyncExitStack
    conn: store.Conn
    table: sql.Identifier
    who: store.Identity
    done: bool = False

    async def finish(self, status: int, headers: dict[str, str], body: bytes) -> None:
        """Store a successful response and commit; roll back for any other status."""
        if self.done:
            return
        if not 200 <= status < 300:
            await self.abandon()
            return
        self.done = True
        kept = {name: headers[name] for name in STORED_HEADERS if name in headers}
        async with self.stack:  # commits on normal exit, rolls back if save() fails
            await store.save(self.conn, self.table, self.who, status, body, kept)

    async def abandon(self) -> None:
        """Roll the claim back, so a repeat of this request runs again."""
        if self.done:
            return
        self.done = True
        rollback = psycopg.Rollback()
        await self.stack.__aexit__(type(rollback), rollback, None)


@dataclass
class Slot:
    claim: Claim | None = field(default=None)
