"""tenant_counter: per-tenant numbers ('revision', 'change_set', 'rollout', 'audit').

Taking a number locks the counter row until commit, so one tenant's numbers commit in order and
never fork, and a rolled-back transaction leaves no gap.
"""

from __future__ import annotations

from uuid import UUID

from platformkit.db.scope import Conn

NAMES = ("revision", "change_set", "rollout", "audit")


async def init_counters(conn: Conn, tenant_id: UUID) -> None:
    await conn.execute(
        "INSERT INTO tenant_counter (tenant_id, name) SELECT %s, unnest(%s::text[])",
        (tenant_id, list(NAMES)),
    )


async def take(conn: Conn, tenant_id: UUID, name: str) -> int:
    """The next number; the row lock is held until the transaction ends."""
    cur = await conn.execute(
        "UPDATE tenant_counter SET value = value + 1 WHERE tenant_id = %s AND name = %s "
        "RETURNING value",
        (tenant_id, name),
    )
    row = await cur.fetchone()
    if row is None:
        raise LookupError(f"tenant {tenant_id} has no counter {name!r}")
    return int(row["value"])


async def current(conn: Conn, tenant_id: UUID, name: str) -> int:
    cur = await conn.execute(
        "SELECT value FROM tenant_counter WHERE tenant_id = %s AND name = %s", (tenant_id, name)
    )
    row = await cur.fetchone()
    return int(row["value"]) if row is not None else 0


async def lock(conn: Conn, tenant_id: UUID, name: str) -> None:
    """Hold the counter's row lock until commit without taking a number: writers that take
    it run one after the other, and each then reads what the previous one committed."""
    await conn.execute(
        "SELECT 1 FROM tenant_counter WHERE tenant_id = %s AND name = %s FOR UPDATE",
        (tenant_id, name),
    )
