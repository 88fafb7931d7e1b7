"""Reading and verifying the audit chains (docs/strataplane/architecture.md §6.5).

A tenant chain must run seq 1, 2, 3... without gaps up to the tenant's 'audit' counter, link
each prev_hash to the previous hash (GENESIS first) and hash to its content. The platform chain
is walked in id order with positions 1, 2, 3... (its ids may skip). The first failure is
reported with the row that shows it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from platformkit.audit import GENESIS, verify_chain
from platformkit.db.scope import Conn

from strataplane.actions.access import tenant_tx
from strataplane.actions.context import Ctx
from strataplane.store import audit, counters, platform_audit


@dataclass(frozen=True)
class ChainCheck:
    chain: str
    ok: bool
    checked: int
    bad_row: int | None = None  # tenant chain: seq; platform chain: id
    reason: str | None = None
    detail: str = ""


@dataclass(frozen=True)
class _Link:
    seq: int
    event: dict[str, Any]
    prev_hash: bytes | None
    hash: bytes


async def _walk(
    chain: str,
    batches: AsyncIterator[list[dict[str, Any]]],
    event_of: Callable[[dict[str, Any]], dict[str, Any]],
    key: str,
    positional: bool,
) -> tuple[ChainCheck, int | None]:
    head, next_seq, last = GENESIS, 1, None
    async for rows in batches:
        links = [
            _Link(
                next_seq + i if positional else int(r[key]),
                event_of(r),
                bytes(r["prev_hash"]) if r["prev_hash"] is not None else None,
                bytes(r["hash"]),
            )
            for i, r in enumerate(rows)
        ]
        result = verify_chain(links, start_prev=head, start_seq=next_seq)
        if not result.ok:
            bad = rows[result.bad_index or 0]
            reason = str(result.reason)
            return ChainCheck(
                chain, False, next_seq - 1 + result.checked, int(bad[key]), reason, result.detail
            ), None
        head, next_seq, last = result.head_hash, next_seq + len(rows), int(rows[-1][key])
    return ChainCheck(chain, True, next_seq - 1), last


async def verify_tenant_chain(conn: Conn, tenant_id: UUID) -> ChainCheck:
    """Run in the tenant's scope (or platform scope)."""
    chain = f"strataplane/tenant/{tenant_id}"
    check, last = await _walk(
        chain, audit.iter_rows(conn, tenant_id), audit.event_of, "seq", positional=False
    )
    if not check.ok:
        return check
    counter = await counters.current(conn, tenant_id, "audit")
    if (last or 0) < counter:
        return ChainCheck(
            chain,
            False,
            check.checked,
            (last or 0) + 1,
            "truncated",
            f"the chain ends at seq {last or 0}, the counter is at {counter}",
        )
    if (last or 0) > counter:
        return ChainCheck(
            chain,
            False,
            check.checked,
            counter + 1,
            "beyond_counter",
            f"rows after seq {counter}, which the counter never issued",
        )
    return check


async def verify_platform_chain(conn: Conn) -> ChainCheck:
    check, _last = await _walk(
        "strataplane/platform",
        platform_audit.iter_rows(conn),
        platform_audit.event_of,
        "id",
        positional=True,
    )
    return check


async def verify_audit(ctx: Ctx) -> ChainCheck:
    """The caller's tenant chain (permission audit.read)."""
    async with tenant_tx(ctx) as tx:
        tx.require("audit.read")
        return await verify_tenant_chain(tx.conn, tx.tenant_id)


async def list_audit_events(
    ctx: Ctx, *, before: int | None = None, limit: int = 100
) -> list[dict[str, Any]]:
    async with tenant_tx(ctx) as tx:
        tx.require("audit.read")
        return await audit.list_events(tx.conn, tx.tenant_id, before=before, limit=limit)
