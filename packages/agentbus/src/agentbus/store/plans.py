"""plans (read through the plan_limits view) and subscriptions: a tenant's effective limits are
its plan's ``limits`` with ``subscriptions.overrides`` merged over them key by key."""

from __future__ import annotations

import uuid
from typing import Any

from platformkit.db.scope import Conn
from platformkit.ids import uuid7
from psycopg.types.json import Jsonb

Row = dict[str, Any]


async def plan_limits(conn: Conn, plan: str) -> dict[str, Any] | None:
    cur = await conn.execute("SELECT limits FROM plan_limits WHERE code = %s", (plan,))
    row = await cur.fetchone()
    return None if row is None else dict(row["limits"])


async def insert_subscription(
    conn: Conn, tenant_id: uuid.UUID, plan: str, *, overrides: dict[str, Any] | None = None
) -> Row:
    cur = await conn.execute(
        """INSERT INTO subscriptions (id, tenant_id, plan, overrides) VALUES (%s, %s, %s, %s)
           RETURNING id, tenant_id, plan, billing_ref, status, current_period_start,
                     current_period_end, overrides, created_at""",
        (uuid7(), tenant_id, plan, Jsonb(overrides or {})),
    )
    row = await cur.fetchone()
    assert row is not None
    return row


async def override_limits(conn: Conn, tenant_id: uuid.UUID, overrides: dict[str, Any]) -> None:
    """Merge ``overrides`` into the tenant's subscription overrides, key by key."""
    await conn.execute(
        "UPDATE subscriptions SET overrides = overrides || %s WHERE tenant_id = %s",
        (Jsonb(overrides), tenant_id),
    )


async def effective_limits(conn: Conn, tenant_id: uuid.UUID) -> dict[str, Any]:
    """Plan limits with the subscription's overrides on top; the plan's alone without one."""
    cur = await conn.execute(
        """SELECT p.limits || COALESCE(s.overrides, '{}'::jsonb) AS limits
             FROM tenants t JOIN plan_limits p ON p.code = t.plan
             LEFT JOIN subscriptions s ON s.tenant_id = t.id
            WHERE t.id = %s""",
        (tenant_id,),
    )
    row = await cur.fetchone()
    return {} if row is None else dict(row["limits"])
