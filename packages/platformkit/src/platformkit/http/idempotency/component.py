"""Idempotency-Key for creating requests, as a component each system points at its own table.

Order of events for a request carrying a key (strataplane's ``idempotency_key`` semantics):

1. the system authenticates the request and passes the principal and tenant ids in;
2. the key is claimed by INSERTing its row in a transaction (in the system's tenant scope) that
   stays open while the handler runs; a concurrent repeat blocks on the unique index until that
   transaction ends;
3. a complete 2xx response is stored (status, body, Content-Type, ETag, Location) and committed
   before it is sent; anything else is rolled back, so its repeat runs again;
4. a repeat gets the stored response with ``Idempotent-Replayed: true``; a repeat whose method,
   path or body differ gets 422 ``idempotency_key.mismatch``.

Rows older than the retention (24 h) are ignored when claiming and deleted by :meth:`purge`.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager, AsyncExitStack
from datetime import timedelta
from typing import Any, cast
from uuid import UUID

import psycopg
from starlette.requests import Request
from starlette.responses import Response

from platformkit.db.scope import Pool, ScopeSettings, platform_transaction, tenant_transaction
from platformkit.db.scope import transaction as plain_transaction
from platformkit.http.idempotency import store
from platformkit.http.idempotency.claim import SCOPE_KEY, Claim, Slot
from platformkit.http.idempotency.errors import (
    IdempotencyKeyInProgress,
    IdempotencyKeyMismatch,
    IdempotencyKeyRequired,
)
from platformkit.http.idempotency.keys import HEADER, parse_key, request_hash

__all__ = ["REPLAYED_HEADER", "Idempotency", "IdempotentReplay", "TenantScope", "rls_scope"]

REPLAYED_HEADER = "Idempotent-Replayed"
RETENTION = timedelta(hours=24)

# Given the pool and the request's tenant (None: a platform request), open a transaction in
# which the idempotency table's rows of that tenant are visible and writable. scope(pool, None)
# is also used by purge() and must see every tenant's rows.
TenantScope = Callable[[Pool, UUID | None], AbstractAsyncContextManager[store.Conn]]


def _no_rls(pool: Pool, tenant_id: UUID | None) -> AbstractAsyncContextManager[store.Conn]:
    return plain_transaction(pool)


def rls_scope(settings: ScopeSettings) -> TenantScope:
    """The usual scope: the tenant's transaction, or platform scope for platform requests."""

    def scope(pool: Pool, tenant_id: UUID | None) -> AbstractAsyncContextManager[store.Conn]:
        if tenant_id is None:
            return platform_transaction(pool, settings)
        return tenant_transaction(pool, settings, tenant_id)

    return scope


class IdempotentReplay(Exception):
    """Raised by a claim whose key already holds a response; rendered by its handler."""

    def __init__(self, stored: store.StoredResponse) -> None:
        super().__init__("idempotent replay")
        self.stored = stored


def replay_response(request: Request, exc: Exception) -> Response:
    stored = cast(IdempotentReplay, exc).stored
    headers = {**stored.headers, REPLAYED_HEADER: "true"}
    return Response(stored.body, status_code=stored.status, headers=headers)


class Idempotency:
    """Idempotency keys stored in ``table`` (``"schema.table"``), claimed through ``pool``.

    ``pool`` may be a callable returning the pool, for pools opened in the app's lifespan.
    ``wait_timeout`` bounds how long a repeat waits for the original to finish (then 409).
    """

    def __init__(
        self,
        pool: Pool | Callable[[], Pool],
        *,
        table: str,
        scope: TenantScope = _no_rls,
        retention: timedelta = RETENTION,
        wait_timeout: float = 30.0,
        required: bool = False,
    ) -> None:
        self._pool: Callable[[], Pool] = pool if callable(pool) else (lambda: pool)
        self.table = store.qualified(table)
        self.scope = scope
        self.retention = retention
        self.wait_timeout = wait_timeout
        self.required = required

    async def claim(self, request: Request, *, principal_id: UUID, tenant_id: UUID | None) -> None:
        """Claim the request's key, if it has one; call it after authentication.

        Returns normally when the handler should run (no key, or key claimed). Raises
        :class:`IdempotentReplay` for a repeat and a problem for a bad, mismatched or busy key.
        """
        key = parse_key(request.headers.get(HEADER))
        if key is None:
            if self.required:
                raise IdempotencyKeyRequired()
            return
        slot = request.scope.get(SCOPE_KEY)
        if not isinstance(slot, Slot):
            raise RuntimeError("idempotency needs the kernel middleware: platformkit.http.install")
        if slot.claim is not None:
            raise RuntimeError("this request has already claimed an idempotency key")
        digest = request_hash(request.method, request.url.path, await request.body())
        who = store.Identity(principal_id, tenant_id, key)
        try:
            async with AsyncExitStack() as stack:
                conn = await stack.enter_async_context(self.scope(self._pool(), tenant_id))
                await conn.execute(
                    "SELECT set_config('lock_timeout', %s, true)",
                    (f"{int(self.wait_timeout * 1000)}ms",),
                )
                stored = await store.claim(conn, self.table, who, digest, self.retention)
                if stored is None:
                    slot.claim = Claim(stack.pop_all(), conn, self.table, who)
                    return
        except psycopg.errors.LockNotAvailable:
            raise IdempotencyKeyInProgress(headers={"Retry-After": "1"}) from None
        if stored.request_hash != digest:
            raise IdempotencyKeyMismatch()
        raise IdempotentReplay(stored)

    def dependency(
        self, principal: Callable[..., Any], ids: Callable[[Any], tuple[UUID, UUID | None]]
    ) -> Callable[..., Any]:
        """A FastAPI dependency: resolves ``principal`` (the system's authentication
        dependency), maps its result to ``(principal_id, tenant_id)`` with ``ids``, claims."""
        from platformkit.http.idempotency.depends import claim_dependency

        return claim_dependency(self, principal, ids)

    async def purge(self, *, batch: int = 10_000) -> int:
        """Delete rows older than the retention, in batches; return how many were deleted."""
        total = 0
        while True:
            async with self.scope(self._pool(), None) as conn:
                deleted = await store.purge_batch(conn, self.table, self.retention, batch)
            total += deleted
            if deleted < batch:
                return total
