"""Small helpers for reading result rows."""

from __future__ import annotations

from typing import Any

from psycopg import AsyncCursor

Row = dict[str, Any]


async def one(cur: AsyncCursor[Row]) -> Row:
    """The single row a statement must return (INSERT/UPDATE ... RETURNING of a known row)."""
    row = await cur.fetchone()
    if row is None:
        raise LookupError("the statement returned no row")
    return row


async def maybe(cur: AsyncCursor[Row]) -> Row | None:
    return await cur.fetchone()
