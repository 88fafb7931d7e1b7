"""The SQL behind idempotency keys, for a table shaped like strataplane's ``idempotency_key``.

Columns: principal_id uuid, key text, tenant_id uuid NULL, request_hash bytea,
response_status integer, response_body bytea, response_headers jsonb, created_at timestamptz;
UNIQUE NULLS NOT DISTINCT (principal_id, tenant_id, key). The table name is a parameter, so each
system points these statements at its own (RLS-protected) table.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any
from uuid import UUID

from psycopg import AsyncConnection, sql
from psycopg.types.json import Jsonb

__all__ = ["Identity", "StoredResponse", "claim", "purge_batch", "qualified", "save"]

Conn = AsyncConnection[dict[str, Any]]

# A fresh row is a placeholder (status 0, empty body) that nobody else can see: it commits only
# after save() filled it. A row older than the retention is taken over as if it were absent;
# any other existing row is locked, left unchanged, and read back by the caller.
_CLAIM = """
INSERT INTO {table} AS held
    (principal_id, tenant_id, key, request_hash, response_status, response_body)
VALUES (%(principal)s, %(tenant)s, %(key)s, %(hash)s, 0, ''::bytea)
ON CONFLICT (principal_id, tenant_id, key) DO UPDATE
    SET request_hash = EXCLUDED.request_hash, response_status = 0,
        response_body = ''::bytea, response_headers = '{{}}'::jsonb, created_at = now()
    WHERE held.created_at < now() - %(ttl)s
RETURNING true AS claimed
"""
_MATCH = (
    "principal_id = %(principal)s AND tenant_id IS NOT DISTINCT FROM %(tenant)s AND key = %(key)s"
)
_READ = "SELECT request_hash, response_status, response_body, response_headers FROM {table} WHERE "
_SAVE = """UPDATE {table} SET response_status = %(status)s, response_body = %(body)s,
    response_headers = %(headers)s WHERE """
_PURGE = """
DELETE FROM {table} WHERE ctid = ANY (ARRAY(
    SELECT ctid FROM {table} WHERE created_at < now() - %(ttl)s LIMIT %(limit)s))
"""


@dataclass(frozen=True)
class Identity:
    principal_id: UUID
    tenant_id: UUID | None
    key: str

    def params(self) -> dict[str, Any]:
        return {"principal": self.principal_id, "tenant": self.tenant_id, "key": self.key}


@dataclass(frozen=True)
class StoredResponse:
    request_hash: bytes
    status: int
    body: bytes
    headers: dict[str, str]


def qualified(name: str) -> sql.Identifier:
    """``"schema.table"`` or ``"table"`` as a quoted identifier."""
    return sql.Identifier(*name.split("."))


async def claim(
    conn: Conn, table: sql.Identifier, who: Identity, digest: bytes, ttl: timedelta
) -> StoredResponse | None:
    """Claim the key (None) or return the response already stored under it.

    Waits, on the unique index, for a transaction holding the same key to end.
    """
    params = {**who.params(), "hash": digest, "ttl": ttl}
    cur = await conn.execute(sql.SQL(_CLAIM).format(table=table), params)
    if await cur.fetchone() is not None:
        return None
    cur = await conn.execute(sql.SQL(_READ + _MATCH).format(table=table), params)
    row = await cur.fetchone()
    if row is None:  # the holder's row is invisible to this scope: a misconfigured policy
        raise LookupError("idempotency row exists but cannot be read in this scope")
    return StoredResponse(
        bytes(row["request_hash"]),
        int(row["response_status"]),
        bytes(row["response_body"]),
        {str(k): str(v) for k, v in row["response_headers"].items()},
    )


async def save(
    conn: Conn,
    table: sql.Identifier,
    who: Identity,
    status: int,
    body: bytes,
    headers: dict[str, str],
) -> None:
    params = {**who.params(), "status": status, "body": body, "headers": Jsonb(headers)}
    await conn.execute(sql.SQL(_SAVE + _MATCH).format(table=table), params)


async def purge_batch(conn: Conn, table: sql.Identifier, ttl: timedelta, limit: int) -> int:
    cur = await conn.execute(sql.SQL(_PURGE).format(table=table), {"ttl": ttl, "limit": limit})
    return cur.rowcount
