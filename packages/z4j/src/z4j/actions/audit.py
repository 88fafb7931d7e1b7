"""Appending to and verifying the audit chain (``z4j audit verify`` runs ``verify_log``)."""

from __future__ import annotations

import uuid
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

import psycopg
from platformkit.audit import GENESIS, verify_chain
from platformkit.db.scope import Conn
from psycopg.rows import dict_row

from z4j.brain import Brain
from z4j.store import audit as audit_store

# The API key a request acts with (set by the API's middleware for its duration): every row
# appended meanwhile names it in ``details.api_key``, so a key's writes can be told from its
# owner's own.
ACTING_KEY: ContextVar[uuid.UUID | None] = ContextVar("z4j_acting_api_key", default=None)


async def record(
    conn: Conn,
    brain: Brain,
    action: str,
    *,
    actor: uuid.UUID | None,
    project_id: uuid.UUID | None = None,
    target_type: str | None = None,
    target_id: uuid.UUID | None = None,
    details: dict[str, Any] | None = None,
) -> None:
    """Append one row inside the action's transaction, so it commits with the change."""
    key = ACTING_KEY.get()
    if key is not None:
        details = {**(details or {}), "api_key": str(key)}
    entry = audit_store.Entry(action, actor, project_id, target_type, target_id, details)
    await audit_store.append(conn, brain.secrets.audit_key, entry)


@dataclass(frozen=True)
class _Row:
    seq: int
    event: dict[str, Any]
    prev_hash: bytes | None
    hash: bytes


def _hex(value: str | None) -> bytes | None:
    if value is None:
        return None
    try:
        return bytes.fromhex(value)
    except ValueError:
        return b""  # unreadable: compares unequal to every real hash


@dataclass(frozen=True)
class AuditCheck:
    ok: bool
    checked: int
    bad_id: uuid.UUID | None = None
    reason: str | None = None
    detail: str = ""


async def verify_log(conn: Conn, key: bytes) -> AuditCheck:
    """Walk the whole chain in id order and name the first row that breaks it."""
    head, seq = GENESIS, 1
    async for batch in audit_store.iter_rows(conn):
        rows = [
            _Row(
                seq + i,
                audit_store.event_of(r),
                _hex(r["prev_row_hmac"]),
                _hex(r["row_hmac"]) or b"",
            )
            for i, r in enumerate(batch)
        ]
        result = verify_chain(rows, start_prev=head, start_seq=seq, key=key)
        if not result.ok:
            bad = batch[result.bad_index or 0]
            return AuditCheck(
                False, seq - 1 + result.checked, bad["id"], str(result.reason), result.detail
            )
        head, seq = result.head_hash, seq + len(rows)
    return AuditCheck(True, seq - 1)


async def verify_database(url: str, key: bytes) -> AuditCheck:
    """``verify_log`` over its own connection (the CLI's entry point)."""
    async with (
        await psycopg.AsyncConnection.connect(url, row_factory=dict_row) as conn,
        conn.transaction(),
    ):
        return await verify_log(conn, key)
