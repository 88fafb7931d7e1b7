"""Long-poll sessions: the ``agent_http_sessions`` and ``agent_http_nonces`` tables
(migration 0030, docs/decisions/0041).

Any brain replica may serve any request of a session, so its replay state is here, and every
check or reservation is one statement that PostgreSQL serialises on the session's row:
``take_inbound`` accepts a frame only if its seq is above the last one taken and its nonce is
new; ``reserve_outbound`` hands out the next seqs the brain signs with.
"""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta
from typing import Any

from platformkit.db.scope import Conn

IDLE_SECONDS = 600
NONCE_MEMORY_SECONDS = 180
_NONCE_MEMORY = timedelta(seconds=NONCE_MEMORY_SECONDS)
_COLUMNS = """agent_id, project_id, session_id, dialect, token_hash, worker_id, out_seq, in_seq,
    closed_code, used_at"""


async def open_hello(
    conn: Conn,
    *,
    agent_id: uuid.UUID,
    project_id: uuid.UUID,
    session_id: str,
    token_hash: str,
    worker_id: str,
    now: datetime,
    replaced_code: int,
) -> None:
    """A session opened by ``hello``; the open sessions of the same worker are replaced."""
    await conn.execute(
        """UPDATE agent_http_sessions SET closed_code = %s
           WHERE agent_id = %s AND worker_id = %s AND dialect = 'hello' AND closed_code IS NULL""",
        (replaced_code, agent_id, worker_id),
    )
    await conn.execute(
        """INSERT INTO agent_http_sessions (agent_id, session_id, project_id, dialect, token_hash,
               worker_id, created_at, used_at)
           VALUES (%s, %s, %s, 'hello', %s, %s, %s, %s)""",
        (agent_id, session_id, project_id, token_hash, worker_id, now, now),
    )


async def use_nonce_session(
    conn: Conn,
    *,
    agent_id: uuid.UUID,
    project_id: uuid.UUID,
    session_id: str,
    token_hash: str,
    now: datetime,
) -> tuple[dict[str, Any], bool]:
    """The session an agent names by its nonce, made on first use; and whether it was made.

    A session idle past ``IDLE_SECONDS`` starts over, as a new one would."""
    cur = await conn.execute(
        f"""INSERT INTO agent_http_sessions AS s (agent_id, session_id, project_id, dialect,
               token_hash, created_at, used_at)
           VALUES (%s, %s, %s, 'nonce', %s, %s, %s)
           ON CONFLICT (agent_id, session_id) DO UPDATE SET used_at = EXCLUDED.used_at,
               out_seq = CASE WHEN s.used_at < %s THEN 0 ELSE s.out_seq END,
               in_seq = CASE WHEN s.used_at < %s THEN 0 ELSE s.in_seq END
           RETURNING {_COLUMNS}, (xmax = 0) AS created""",
        (agent_id, session_id, project_id, token_hash, now, now, *(_idle_since(now),) * 2),
    )
    row = await cur.fetchone()
    assert row is not None
    return row, bool(row.pop("created"))


async def find_hello(conn: Conn, session_id: str, now: datetime) -> dict[str, Any] | None:
    """Platform scope: the session id names the project before anything else is known. An
    idle session is gone; a found one counts as used now."""
    cur = await conn.execute(
        f"""UPDATE agent_http_sessions SET used_at = %s
           WHERE session_id = %s AND dialect = 'hello' AND used_at >= %s
           RETURNING {_COLUMNS}""",
        (now, session_id, _idle_since(now)),
    )
    return await cur.fetchone()


async def is_open(conn: Conn, agent_id: uuid.UUID, session_id: str) -> bool:
    cur = await conn.execute(
        """SELECT 1 FROM agent_http_sessions
           WHERE agent_id = %s AND session_id = %s AND closed_code IS NULL""",
        (agent_id, session_id),
    )
    return await cur.fetchone() is not None


async def close(conn: Conn, agent_id: uuid.UUID, session_id: str, code: int) -> None:
    await conn.execute(
        """UPDATE agent_http_sessions SET closed_code = %s
           WHERE agent_id = %s AND session_id = %s AND closed_code IS NULL""",
        (code, agent_id, session_id),
    )


async def take_inbound(
    conn: Conn,
    agent_id: uuid.UUID,
    project_id: uuid.UUID,
    session_id: str,
    seq: int,
    nonce: str,
    now: datetime,
) -> str | None:
    """Take one authentic frame's seq and nonce: None when taken, else why not. The caller
    raises on a refusal inside its transaction, so a refused frame changes nothing."""
    # The condition is re-checked on the row's newest version when another replica updated
    # it meanwhile, so of two frames with the same seq exactly one is taken.
    cur = await conn.execute(
        """UPDATE agent_http_sessions SET in_seq = %s
           WHERE agent_id = %s AND session_id = %s AND in_seq < %s RETURNING in_seq""",
        (seq, agent_id, session_id, seq),
    )
    if await cur.fetchone() is None:
        cur = await conn.execute(
            "SELECT in_seq FROM agent_http_sessions WHERE agent_id = %s AND session_id = %s",
            (agent_id, session_id),
        )
        row = await cur.fetchone()
        if row is None:
            return "session gone"
        return f"sequence went backwards ({seq} after {row['in_seq']})"
    cur = await conn.execute(
        """INSERT INTO agent_http_nonces (agent_id, session_id, nonce, project_id, seen_at)
           VALUES (%s, %s, %s, %s, %s)
           ON CONFLICT (agent_id, session_id, nonce) DO UPDATE SET seen_at = EXCLUDED.seen_at
               WHERE agent_http_nonces.seen_at < %s
           RETURNING 1""",
        (agent_id, session_id, nonce, project_id, now, now - _NONCE_MEMORY),
    )
    return None if await cur.fetchone() is not None else "nonce reused"


async def reserve_outbound(conn: Conn, agent_id: uuid.UUID, session_id: str, count: int) -> int:
    """The first of ``count`` consecutive seqs no other replica will sign with."""
    cur = await conn.execute(
        """UPDATE agent_http_sessions SET out_seq = out_seq + %s
           WHERE agent_id = %s AND session_id = %s RETURNING out_seq""",
        (count, agent_id, session_id),
    )
    row = await cur.fetchone()
    if row is None:
        raise LookupError(session_id)
    return int(row["out_seq"]) - count + 1


async def purge(conn: Conn, now: datetime) -> tuple[int, int]:
    """Platform scope: delete idle sessions and nonces past the nonce memory."""
    cur = await conn.execute(
        "DELETE FROM agent_http_sessions WHERE used_at < %s", (_idle_since(now),)
    )
    sessions = cur.rowcount
    cur = await conn.execute(
        "DELETE FROM agent_http_nonces WHERE seen_at < %s",
        (now - _NONCE_MEMORY,),
    )
    return sessions, cur.rowcount


def _idle_since(now: datetime) -> datetime:
    return now - timedelta(seconds=IDLE_SECONDS)
