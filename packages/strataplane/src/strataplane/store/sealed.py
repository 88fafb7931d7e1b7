"""sealed_value: values encrypted under a tenant's data key, each with its owner.

The platformkit envelope's sealed bytes are ``header (version, key id) || nonce || body``; the
row keeps the key id and the nonce in their own columns and the body as ``ciphertext``, and
``sealed_bytes`` puts them back together. The owner is part of the associated data, so a value
opens only for the row that references it.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from platformkit.db.scope import Conn

from strataplane.store.rows import maybe

_HEADER = struct.Struct(">BI")
_VERSION = 1
_NONCE = 12


@dataclass(frozen=True)
class SealedRow:
    id: UUID
    owner: str
    key_id: int
    nonce: bytes
    ciphertext: bytes


def split_sealed(sealed: bytes) -> tuple[int, bytes, bytes]:
    """(key id, nonce, ciphertext) of the envelope's bytes."""
    _version, key_id = _HEADER.unpack_from(sealed)
    start = _HEADER.size
    return int(key_id), sealed[start : start + _NONCE], sealed[start + _NONCE :]


def sealed_bytes(row: SealedRow) -> bytes:
    return _HEADER.pack(_VERSION, row.key_id) + row.nonce + row.ciphertext


def _row(r: dict[str, Any]) -> SealedRow:
    return SealedRow(r["id"], r["owner"], r["key_id"], bytes(r["nonce"]), bytes(r["ciphertext"]))


async def insert_sealed(
    conn: Conn, tenant_id: UUID, value_id: UUID, owner: str, sealed: bytes
) -> None:
    key_id, nonce, body = split_sealed(sealed)
    await conn.execute(
        "INSERT INTO sealed_value (id, tenant_id, owner, key_id, nonce, ciphertext) "
        "VALUES (%s, %s, %s, %s, %s, %s)",
        (value_id, tenant_id, owner, key_id, nonce, body),
    )


async def get_sealed(conn: Conn, tenant_id: UUID, value_id: UUID) -> SealedRow | None:
    cur = await conn.execute(
        "SELECT id, owner, key_id, nonce, ciphertext FROM sealed_value "
        "WHERE tenant_id = %s AND id = %s",
        (tenant_id, value_id),
    )
    row = await maybe(cur)
    return _row(row) if row is not None else None


async def get_many(conn: Conn, tenant_id: UUID, value_ids: list[UUID]) -> dict[UUID, SealedRow]:
    cur = await conn.execute(
        "SELECT id, owner, key_id, nonce, ciphertext FROM sealed_value "
        "WHERE tenant_id = %s AND id = ANY(%s)",
        (tenant_id, value_ids),
    )
    return {row.id: row for row in map(_row, await cur.fetchall())}


async def not_under(
    conn: Conn, tenant_id: UUID, key_id: int, *, after: UUID | None, limit: int
) -> list[SealedRow]:
    """Values sealed under another data key than ``key_id``, in id order (re-encryption)."""
    cur = await conn.execute(
        "SELECT id, owner, key_id, nonce, ciphertext FROM sealed_value WHERE tenant_id = %s "
        "AND key_id <> %s AND (%s::uuid IS NULL OR id > %s) ORDER BY id LIMIT %s",
        (tenant_id, key_id, after, after, limit),
    )
    return [_row(r) for r in await cur.fetchall()]


async def replace_sealed(conn: Conn, tenant_id: UUID, value_id: UUID, sealed: bytes) -> None:
    key_id, nonce, body = split_sealed(sealed)
    await conn.execute(
        "UPDATE sealed_value SET key_id = %s, nonce = %s, ciphertext = %s "
        "WHERE tenant_id = %s AND id = %s",
        (key_id, nonce, body, tenant_id, value_id),
    )


async def delete_sealed(conn: Conn, tenant_id: UUID, value_ids: list[UUID]) -> None:
    await conn.execute(
        "DELETE FROM sealed_value WHERE tenant_id = %s AND id = ANY(%s)", (tenant_id, value_ids)
    )
