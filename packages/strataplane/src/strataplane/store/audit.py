"""audit_event: one hash chain per tenant (docs/strataplane/architecture.md §6.2, §6.3).

``seq`` comes from tenant_counter 'audit', whose row lock is held until commit, so a tenant's
events commit in seq order and the chain never forks. ``hash = SHA-256(prev_hash ||
canonical(event))`` with platformkit's plain chain; the first event links to GENESIS and stores
it. The append is the last write of its action's transaction.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

from platformkit.audit import GENESIS, chain_hash
from platformkit.db.scope import Conn
from psycopg import sql
from psycopg.types.json import Jsonb

from strataplane.store import counters
from strataplane.store.rows import maybe

_ROW = (
    "tenant_id, seq, ts, actor_kind, actor_id, on_behalf_of, action, object_kind, object_id, "
    "request_id, source_ip, details, prev_hash, hash"
)


@dataclass(frozen=True)
class Event:
    """What an action records; the chain fields are added by ``append``."""

    actor_kind: str
    actor_id: str | None
    action: str
    object_kind: str
    object_id: str
    on_behalf_of: UUID | None = None
    request_id: str | None = None
    source_ip: str | None = None
    details: Mapping[str, Any] = field(default_factory=dict)


def check_details(value: Any, path: str = "details") -> None:
    """Only objects, arrays, strings, integers, booleans and null: jsonb gives back the same
    canonical bytes for those, never for floats."""
    if isinstance(value, Mapping):
        for key, item in value.items():
            if not isinstance(key, str):
                raise TypeError(f"{path}: object keys must be strings")
            check_details(item, f"{path}.{key}")
    elif isinstance(value, list | tuple):
        for i, item in enumerate(value):
            check_details(item, f"{path}[{i}]")
    elif value is not None and not isinstance(value, str | int | bool):
        raise TypeError(f"{path}: {type(value).__name__} is not allowed in audit details")


def ts_text(ts: datetime) -> str:
    return ts.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def ip_text(value: object) -> str | None:
    return None if value is None else str(value).split("/", 1)[0]


def uuid_text(value: object) -> str | None:
    return None if value is None else str(value)


def event_of(row: Mapping[str, Any]) -> dict[str, Any]:
    """The hashed object of a stored (or about to be stored) tenant event."""
    return {
        "tenant_id": str(row["tenant_id"]),
        "seq": int(row["seq"]),
        "ts": ts_text(row["ts"]),
        "actor_kind": row["actor_kind"],
        "actor_id": row["actor_id"],
        "on_behalf_of": uuid_text(row["on_behalf_of"]),
        "action": row["action"],
        "object_kind": row["object_kind"],
        "object_id": row["object_id"],
        "request_id": row["request_id"],
        "source_ip": ip_text(row["source_ip"]),
        "details": row["details"],
    }


def now() -> datetime:
    """Microsecond precision in UTC: what timestamptz stores, so the hashed value is the
    stored value."""
    return datetime.now(UTC)


async def append(conn: Conn, tenant_id: UUID, event: Event) -> dict[str, Any]:
    """Append ``event`` to the tenant's chain inside the caller's transaction."""
    details = dict(event.details)
    check_details(details)
    seq = await counters.take(conn, tenant_id, "audit")
    prev_row = await maybe(
        await conn.execute(
            "SELECT hash FROM audit_event WHERE tenant_id = %s AND seq = %s", (tenant_id, seq - 1)
        )
    )
    prev = bytes(prev_row["hash"]) if prev_row is not None else GENESIS
    row: dict[str, Any] = {
        "tenant_id": tenant_id,
        "seq": seq,
        "ts": now(),
        "actor_kind": event.actor_kind,
        "actor_id": event.actor_id,
        "on_behalf_of": event.on_behalf_of,
        "action": event.action,
        "object_kind": event.object_kind,
        "object_id": event.object_id,
        "request_id": event.request_id,
        "source_ip": ip_text(event.source_ip),
        "details": details,
    }
    return await insert_linked(conn, "audit_event", row, prev, event_of)


async def insert_linked(
    conn: Conn,
    table: str,
    row: dict[str, Any],
    prev: bytes,
    hashed: Callable[[Mapping[str, Any]], dict[str, Any]],
) -> dict[str, Any]:
    """Link ``row`` to the chain's previous hash ``prev``, hash the object ``hashed`` makes of
    it, and insert it into ``table``; the row as stored."""
    row["prev_hash"] = prev
    row["hash"] = chain_hash(prev, hashed(row))
    columns = list(row)
    statement = sql.SQL("INSERT INTO {} ({}) VALUES ({})").format(
        sql.Identifier(table),
        sql.SQL(", ").join(map(sql.Identifier, columns)),
        sql.SQL(", ").join(map(sql.Placeholder, columns)),
    )
    await conn.execute(statement, {**row, "details": Jsonb(row["details"])})
    return row


async def iter_rows(
    conn: Conn, tenant_id: UUID, batch: int = 1000
) -> AsyncIterator[list[dict[str, Any]]]:
    """The tenant's events in seq order, in batches (keyset on seq)."""
    after = 0
    while True:
        cur = await conn.execute(
            f"SELECT {_ROW} FROM audit_event WHERE tenant_id = %s AND seq > %s "
            "ORDER BY seq LIMIT %s",
            (tenant_id, after, batch),
        )
        rows = await cur.fetchall()
        if not rows:
            return
        yield rows
        after = int(rows[-1]["seq"])


async def list_events(
    conn: Conn, tenant_id: UUID, *, before: int | None, limit: int
) -> list[dict[str, Any]]:
    cur = await conn.execute(
        f"SELECT {_ROW} FROM audit_event WHERE tenant_id = %(t)s "
        "AND (%(before)s::bigint IS NULL OR seq < %(before)s) ORDER BY seq DESC LIMIT %(limit)s",
        {"t": tenant_id, "before": before, "limit": limit},
    )
    return list(await cur.fetchall())
