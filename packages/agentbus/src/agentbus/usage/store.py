"""usage and model_pricing: SQL only. ``usage`` functions take the tenant and run inside its
scope (RLS); ``model_pricing`` is the platform's, read-only to the gateway."""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from decimal import Decimal
from typing import Any

from platformkit.db.scope import Conn
from psycopg import sql

from agentbus.usage.domain import Price

Row = dict[str, Any]

COLUMNS = (
    "usage_id", "recorded_at", "tenant_id", "workspace_id", "agent_id", "task_id", "message_id",
    "conversation_id", "harness", "provider", "model", "input_tokens", "output_tokens",
    "cache_read_tokens", "cache_write_tokens", "reasoning_tokens", "cost_usd", "cost_source",
    "reported_by", "confidence", "bus_bytes_in", "bus_bytes_out", "bus_messages", "duration_ms",
    "details",
)  # fmt: skip


async def insert_usage(conn: Conn, rows: Sequence[Row]) -> set[uuid.UUID]:
    """Insert ``rows`` (dicts of ``COLUMNS``); the ids that were new. A row whose id the tenant
    already holds is left as it is: uploads are idempotent by ``usage_id``."""
    if not rows:
        return set()
    one = sql.SQL("({})").format(sql.SQL(", ").join(sql.Placeholder() * len(COLUMNS)))
    cur = await conn.execute(
        sql.SQL(
            "INSERT INTO usage ({}) VALUES {} ON CONFLICT (tenant_id, usage_id) DO NOTHING"
            " RETURNING usage_id"
        ).format(
            sql.SQL(", ").join(map(sql.Identifier, COLUMNS)), sql.SQL(", ").join([one] * len(rows))
        ),
        [row[c] for row in rows for c in COLUMNS],
    )
    return {r["usage_id"] for r in await cur.fetchall()}


async def prices(conn: Conn, keys: Iterable[tuple[str, str]]) -> dict[tuple[str, str], list[Price]]:
    """Every ``model_pricing`` row of the (provider, model) ``keys``."""
    wanted = sorted(set(keys))
    if not wanted:
        return {}
    cur = await conn.execute(
        """SELECT provider, model, effective_from, input_per_mtok, output_per_mtok,
                  cache_read_per_mtok, cache_write_per_mtok
             FROM model_pricing
            WHERE (provider, model) IN (SELECT * FROM unnest(%s::text[], %s::text[]))""",
        ([p for p, _ in wanted], [m for _, m in wanted]),
    )
    out: dict[tuple[str, str], list[Price]] = {}
    for r in await cur.fetchall():
        price = Price(r["effective_from"], r["input_per_mtok"], r["output_per_mtok"],
                      r["cache_read_per_mtok"], r["cache_write_per_mtok"])  # fmt: skip
        out.setdefault((r["provider"], r["model"]), []).append(price)
    return out


async def task_parties(
    conn: Conn, tenant_id: uuid.UUID, task_ids: Iterable[uuid.UUID]
) -> dict[uuid.UUID, tuple[uuid.UUID, uuid.UUID]]:
    """(requester, recipient) of each task of ``task_ids`` the tenant holds."""
    cur = await conn.execute(
        "SELECT id, requester_agent_id, recipient_agent_id FROM tasks"
        " WHERE tenant_id = %s AND id = ANY(%s)",
        (tenant_id, list(set(task_ids))),
    )
    return {
        r["id"]: (r["requester_agent_id"], r["recipient_agent_id"]) for r in await cur.fetchall()
    }


async def task_total(conn: Conn, tenant_id: uuid.UUID, task_id: uuid.UUID) -> Decimal:
    """The cost of every usage record of the task."""
    cur = await conn.execute(
        "SELECT COALESCE(sum(cost_usd), 0) AS total FROM usage"
        " WHERE tenant_id = %s AND task_id = %s",
        (tenant_id, task_id),
    )
    row = await cur.fetchone()
    assert row is not None
    return Decimal(row["total"])
