"""The audit log: an append-only, HMAC-chained record of every mutation.

Each row's ``row_hmac`` is ``HMAC-SHA256(audit_key, prev || canonical_json(event))`` where
``event`` is the row's own columns (see ``event_of``) and ``prev`` the previous row's
``row_hmac`` (32 zero bytes for the first row; stored as NULL). Appends take a
transaction-level advisory lock, so two writers never link to the same predecessor, and give
the new row an id greater than the previous one, so ``ORDER BY id`` is chain order even when
several processes mint ids within one millisecond.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from platformkit.audit import chain_hash
from platformkit.db.scope import Conn
from platformkit.ids import uuid7
from psycopg.types.json import Jsonb

LOCK_KEY = int.from_bytes(hashlib.sha256(b"z4j.audit_log").digest()[:8], "big", signed=True)


@dataclass(frozen=True)
class Entry:
    action: str
    actor_user_id: uuid.UUID | None = None
    project_id: uuid.UUID | None = None
    target_type: str | None = None
    target_id: uuid.UUID | None = None
    details: dict[str, Any] | None = None


def _text(value: uuid.UUID | None) -> str | None:
    return None if value is None else str(value)


def event_of(row: dict[str, Any]) -> dict[str, Any]:
    """The hashed form of a row: every column except the two chain columns."""
    ts: datetime = row["ts"]
    return {
        "id": str(row["id"]),
        "ts": ts.astimezone(UTC).isoformat(),
        "actor_user_id": _text(row["actor_user_id"]),
        "project_id": _text(row["project_id"]),
        "action": row["action"],
        "target_type": row["target_type"],
        "target_id": _text(row["target_id"]),
        "details": row["details"],
    }


async def append(conn: Conn, key: bytes, entry: Entry) -> dict[str, Any]:
    """Append ``entry`` inside the caller's transaction; the lock is held until it ends."""
    await conn.execute("SELECT pg_advisory_xact_lock(%s)", (LOCK_KEY,))
    cur = await conn.execute("SELECT id, row_hmac FROM audit_log ORDER BY id DESC LIMIT 1")
    last = await cur.fetchone()
    row_id = uuid7()
    if last is not None and row_id <= last["id"]:
        row_id = uuid.UUID(int=last["id"].int + 1)
    row: dict[str, Any] = {
        "id": row_id,
        "ts": datetime.now(UTC),
        "actor_user_id": entry.actor_user_id,
        "project_id": entry.project_id,
        "action": entry.action,
        "target_type": entry.target_type,
        "target_id": entry.target_id,
        "details": entry.details or {},
    }
    prev = bytes.fromhex(last["row_hmac"]) if last is not None else None
    row["row_hmac"] = chain_hash(prev, event_of(row), key=key).hex()
    row["prev_row_hmac"] = prev.hex() if prev is not None else None
    await conn.execute(
        "INSERT INTO audit_log (id, ts, actor_user_id, project_id, action, target_type, "
        "target_id, details, row_hmac, prev_row_hmac) VALUES (%(id)s, %(ts)s, "
        "%(actor_user_id)s, %(project_id)s, %(action)s, %(target_type)s, %(target_id)s, "
        "%(details_json)s, %(row_hmac)s, %(prev_row_hmac)s)",
        {**row, "details_json": Jsonb(row["details"])},
    )
    return row


async def iter_rows(conn: Conn, batch: int = 5000) -> AsyncIterator[list[dict[str, Any]]]:
    """Every row in chain order, in batches, through a server-side cursor (needs a
    transaction)."""
    async with conn.cursor(name="z4j_audit_walk") as cur:
        await cur.execute(
            "SELECT id, ts, actor_user_id, project_id, action, target_type, target_id, "
            "details, row_hmac, prev_row_hmac FROM audit_log ORDER BY id"
        )
        while rows := await cur.fetchmany(batch):
            yield rows


async def recent(conn: Conn, project_id: uuid.UUID, limit: int = 50) -> list[dict[str, Any]]:
    cur = await conn.execute(
        "SELECT a.id, a.ts, a.action, a.target_type, a.target_id, a.details, u.email AS actor "
        "FROM audit_log a LEFT JOIN users u ON u.id = a.actor_user_id "
        "WHERE a.project_id = %s ORDER BY a.ts DESC LIMIT %s",
        (project_id, limit),
    )
    return await cur.fetchall()
