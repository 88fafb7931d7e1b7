"""web_session: browser sessions (cookie sp_session). ``id`` is sha256(cookie value) in hex,
so the table never holds a usable session id; ``data`` is JSON of what the session is bound
to."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from platformkit.db.scope import Conn

from strataplane.store.rows import maybe


@dataclass(frozen=True)
class WebSession:
    id: str
    data: dict[str, Any]
    expiry_date: datetime


async def insert_session(
    conn: Conn, session_id: str, data: dict[str, Any], expiry: datetime
) -> None:
    await conn.execute(
        "INSERT INTO web_session (id, data, expiry_date) VALUES (%s, %s, %s)",
        (session_id, json.dumps(data, sort_keys=True).encode(), expiry),
    )


async def get_session(conn: Conn, session_id: str) -> WebSession | None:
    cur = await conn.execute(
        "SELECT id, data, expiry_date FROM web_session WHERE id = %s AND expiry_date > now()",
        (session_id,),
    )
    row = await maybe(cur)
    if row is None:
        return None
    return WebSession(row["id"], json.loads(bytes(row["data"])), row["expiry_date"])


async def delete_session(conn: Conn, session_id: str) -> bool:
    cur = await conn.execute("DELETE FROM web_session WHERE id = %s", (session_id,))
    return cur.rowcount == 1


async def purge_expired(conn: Conn, limit: int = 10_000) -> int:
    cur = await conn.execute(
        "DELETE FROM web_session WHERE id = ANY (ARRAY(SELECT id FROM web_session "
        "WHERE expiry_date <= now() LIMIT %s))",
        (limit,),
    )
    return cur.rowcount
