"""platform_audit_event: the installation's one chain (tenants, catalog, platform admins).

Appends hold the transaction advisory lock (classid 0x73706175 'spau', objid 0) from taking
the id until commit, so events commit in id order. Ids may skip after rollbacks (sequences are
not transactional): the chain follows id order and links by prev_hash, not by contiguity.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

from platformkit.audit import GENESIS
from platformkit.db.scope import Conn

from strataplane.store.audit import check_details, insert_linked, ip_text, now, ts_text, uuid_text
from strataplane.store.rows import maybe, one

LOCK_CLASS, LOCK_OBJECT = 0x73706175, 0
_ROW = (
    "id, ts, actor_kind, actor_id, action, object_kind, object_id, tenant_id, request_id, "
    "source_ip, details, prev_hash, hash"
)


@dataclass(frozen=True)
class PlatformEvent:
    actor_kind: str
    actor_id: str | None
    action: str
    object_kind: str
    object_id: str
    tenant_id: UUID | None = None
    request_id: str | None = None
    source_ip: str | None = None
    details: Mapping[str, Any] = field(default_factory=dict)


def event_of(row: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "id": int(row["id"]),
        "ts": ts_text(row["ts"]),
        "actor_kind": row["actor_kind"],
        "actor_id": row["actor_id"],
        "action": row["action"],
        "object_kind": row["object_kind"],
        "object_id": row["object_id"],
        "tenant_id": uuid_text(row["tenant_id"]),
        "request_id": row["request_id"],
        "source_ip": ip_text(row["source_ip"]),
        "details": row["details"],
    }


async def append(conn: Conn, event: PlatformEvent) -> dict[str, Any]:
    details = dict(event.details)
    check_details(details)
    await conn.execute("SELECT pg_advisory_xact_lock(%s, %s)", (LOCK_CLASS, LOCK_OBJECT))
    id_row = await one(await conn.execute("SELECT nextval('platform_audit_event_id_seq') AS id"))
    last = await maybe(
        await conn.execute("SELECT hash FROM platform_audit_event ORDER BY id DESC LIMIT 1")
    )
    prev = bytes(last["hash"]) if last is not None else GENESIS
    row: dict[str, Any] = {
        "id": int(id_row["id"]),
        "ts": now(),
        "actor_kind": event.actor_kind,
        "actor_id": event.actor_id,
        "action": event.action,
        "object_kind": event.object_kind,
        "object_id": event.object_id,
        "tenant_id": event.tenant_id,
        "request_id": event.request_id,
        "source_ip": ip_text(event.source_ip),
        "details": details,
    }
    return await insert_linked(conn, "platform_audit_event", row, prev, event_of)


async def iter_rows(conn: Conn, batch: int = 1000) -> AsyncIterator[list[dict[str, Any]]]:
    after = 0
    while True:
        cur = await conn.execute(
            f"SELECT {_ROW} FROM platform_audit_event WHERE id > %s ORDER BY id LIMIT %s",
            (after, batch),
        )
        rows = await cur.fetchall()
        if not rows:
            return
        yield rows
        after = int(rows[-1]["id"])
