"""Alert SQL: rules, their firings, and the values rules compare with their thresholds.

``open_firing`` relies on ``alert_firings_open`` (one unresolved firing per rule): when two
evaluations race, one insert wins and the other gets nothing back, so a firing is opened, and
announced, once.
"""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta
from typing import Any

from platformkit.db.scope import Conn
from platformkit.ids import uuid7
from psycopg.types.json import Jsonb

from z4j.domain.alerts import TASK_KINDS, Kind, RuleSpec

_RULE = ", ".join(
    f"r.{c}"
    for c in ("id", "project_id", "name", "kind", "threshold", "window_seconds", "min_tasks",
              "task_name", "queue", "agent_name", "webhook_url", "emails", "enabled",
              "created_by", "created_at", "updated_at")
)  # fmt: skip
_FIRING = ("f.id, f.rule_id, f.project_id, f.started_at, f.resolved_at, f.value, f.last_value,"
           " f.notices, f.attempts, f.last_error")  # fmt: skip


async def list_rules(conn: Conn, project_id: uuid.UUID) -> list[dict[str, Any]]:
    cur = await conn.execute(
        f"SELECT {_RULE}, (SELECT started_at FROM alert_firings f WHERE f.rule_id = r.id"
        " AND f.resolved_at IS NULL) AS firing_since FROM alert_rules r"
        " WHERE r.project_id = %s ORDER BY r.name",
        (project_id,),
    )
    return list(await cur.fetchall())


async def get_rule(conn: Conn, project_id: uuid.UUID, rule_id: uuid.UUID) -> dict[str, Any] | None:
    cur = await conn.execute(
        f"SELECT {_RULE} FROM alert_rules r WHERE project_id = %s AND id = %s FOR UPDATE",
        (project_id, rule_id),
    )
    return await cur.fetchone()


async def create_rule(
    conn: Conn, project_id: uuid.UUID, spec: RuleSpec, created_by: uuid.UUID | None
) -> dict[str, Any] | None:
    """The new rule; None when the project has a rule of that name."""
    row = spec.as_row()
    cur = await conn.execute(
        "INSERT INTO alert_rules AS r (id, project_id, name, kind, threshold, window_seconds,"
        " min_tasks, task_name, queue, agent_name, webhook_url, emails, enabled, created_by)"
        " VALUES (%(id)s, %(project)s, %(name)s, %(kind)s, %(threshold)s, %(window_seconds)s,"
        " %(min_tasks)s, %(task_name)s, %(queue)s, %(agent_name)s, %(webhook_url)s, %(emails)s,"
        " %(enabled)s, %(by)s) ON CONFLICT (project_id, name) DO NOTHING"
        f" RETURNING {_RULE}",
        {**row, "id": uuid7(), "project": project_id, "by": created_by},
    )
    return await cur.fetchone()


async def update_rule(
    conn: Conn, project_id: uuid.UUID, rule_id: uuid.UUID, spec: RuleSpec
) -> dict[str, Any] | None:
    """The changed rule; None when another rule of the project has the new name."""
    cur = await conn.execute(
        "UPDATE alert_rules AS r SET name = %(name)s, kind = %(kind)s, threshold = %(threshold)s,"
        " window_seconds = %(window_seconds)s, min_tasks = %(min_tasks)s,"
        " task_name = %(task_name)s, queue = %(queue)s, agent_name = %(agent_name)s,"
        " webhook_url = %(webhook_url)s, emails = %(emails)s, enabled = %(enabled)s,"
        " updated_at = now() WHERE r.project_id = %(project)s AND r.id = %(id)s"
        " AND NOT EXISTS (SELECT 1 FROM alert_rules o WHERE o.project_id = %(project)s"
        " AND o.name = %(name)s AND o.id <> %(id)s)"
        f" RETURNING {_RULE}",
        {**spec.as_row(), "id": rule_id, "project": project_id},
    )
    return await cur.fetchone()


async def delete_rule(conn: Conn, project_id: uuid.UUID, rule_id: uuid.UUID) -> bool:
    cur = await conn.execute(
        "DELETE FROM alert_rules WHERE project_id = %s AND id = %s", (project_id, rule_id)
    )
    return cur.rowcount > 0


async def list_firings(conn: Conn, project_id: uuid.UUID, limit: int) -> list[dict[str, Any]]:
    cur = await conn.execute(
        f"SELECT {_FIRING}, r.name AS rule_name, r.kind FROM alert_firings f"
        " JOIN alert_rules r ON r.id = f.rule_id WHERE f.project_id = %s"
        " ORDER BY f.started_at DESC, f.id DESC LIMIT %s",
        (project_id, limit),
    )
    return list(await cur.fetchall())


# The evaluator's side, on platform transactions.


async def enabled_rules(conn: Conn) -> list[dict[str, Any]]:
    cur = await conn.execute(
        f"SELECT {_RULE}, p.name AS project_name,"
        " f.id AS open_id FROM alert_rules r JOIN projects p ON p.id = r.project_id"
        " LEFT JOIN alert_firings f ON f.rule_id = r.id AND f.resolved_at IS NULL"
        " WHERE r.enabled OR f.id IS NOT NULL ORDER BY r.project_id, r.id"
    )
    return list(await cur.fetchall())


def _scope(spec: RuleSpec) -> tuple[str, dict[str, Any]]:
    sql, params = "", {}
    for column in ("task_name", "queue"):
        value = getattr(spec, column)
        if value is not None:
            sql += f" AND {'name' if column == 'task_name' else column} = %({column})s"
            params[column] = value
    return sql, params


async def measure(conn: Conn, project_id: uuid.UUID, spec: RuleSpec, now: datetime) -> float | None:
    """The value ``spec`` compares with its threshold, or None when there is none yet."""
    scope, params = _scope(spec)
    params |= {"project": project_id, "now": now,
               "since": now - timedelta(seconds=spec.window_seconds)}  # fmt: skip
    finished = (
        " FROM tasks WHERE project_id = %(project)s AND finished_at >= %(since)s"
        " AND finished_at <= %(now)s AND state IN ('succeeded', 'failed')"
    )
    waiting = " FROM tasks WHERE project_id = %(project)s AND state = 'pending'"
    if spec.kind is Kind.FAILURE_RATE:
        sql = f"SELECT count(*) AS n, count(*) FILTER (WHERE state = 'failed') AS failed{finished}"
    elif spec.kind is Kind.RUNTIME_P95:
        sql = ("SELECT count(runtime_ms) AS n, percentile_cont(0.95) WITHIN GROUP"
               f" (ORDER BY runtime_ms) / 1000.0 AS value{finished}")  # fmt: skip
    elif spec.kind is Kind.QUEUE_DEPTH:
        sql = f"SELECT count(*)::float8 AS value{waiting}"
    elif spec.kind is Kind.BACKLOG_AGE:
        sql = f"SELECT extract(epoch FROM %(now)s - min(enqueued_at))::float8 AS value{waiting}"
    elif spec.kind is Kind.AGENT_OFFLINE:
        sql = (
            "SELECT count(*)::float8 AS value FROM agents WHERE project_id = %(project)s"
            " AND state = 'offline' AND COALESCE(last_seen_at, created_at) < %(since)s"
        )
        if spec.agent_name is not None:
            sql += " AND name = %(agent)s"
    else:
        sql = (
            "SELECT count(*)::float8 AS value FROM agent_workers w JOIN agents a"
            " ON a.id = w.agent_id WHERE w.project_id = %(project)s"
            " AND w.last_seen_at < %(since)s AND w.last_seen_at >= %(now)s - interval '1 day'"
        )
        if spec.agent_name is not None:
            sql += " AND a.name = %(agent)s"
    if spec.kind in TASK_KINDS:
        sql += scope
    else:
        params["agent"] = spec.agent_name
    cur = await conn.execute(sql, params)
    row = await cur.fetchone()
    assert row is not None
    if spec.kind is Kind.FAILURE_RATE:
        n = int(row["n"])
        return None if n < spec.min_tasks else 100.0 * int(row["failed"]) / n
    if spec.kind is Kind.RUNTIME_P95 and int(row["n"]) < spec.min_tasks:
        return None
    value = row["value"]
    return None if value is None else float(value)


async def open_firing(
    conn: Conn, rule_id: uuid.UUID, project_id: uuid.UUID, value: float, now: datetime
) -> uuid.UUID | None:
    cur = await conn.execute(
        "INSERT INTO alert_firings (id, rule_id, project_id, started_at, value, last_value)"
        " VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (rule_id) WHERE resolved_at IS NULL"
        " DO NOTHING RETURNING id",
        (uuid7(), rule_id, project_id, now, value, value),
    )
    row = await cur.fetchone()
    return None if row is None else uuid.UUID(str(row["id"]))


async def resolve_firing(
    conn: Conn, firing_id: uuid.UUID, value: float | None, now: datetime
) -> bool:
    cur = await conn.execute(
        "UPDATE alert_firings SET resolved_at = %s, last_value = %s, owed = true, attempts = 0"
        " WHERE id = %s AND resolved_at IS NULL",
        (now, value, firing_id),
    )
    return cur.rowcount > 0


async def note_value(conn: Conn, firing_id: uuid.UUID, value: float | None) -> None:
    await conn.execute(
        "UPDATE alert_firings SET last_value = %s WHERE id = %s AND last_value IS DISTINCT FROM %s",
        (value, firing_id, value),
    )


async def owing(conn: Conn) -> list[dict[str, Any]]:
    """Firings that may still owe a notice (the domain decides which), with their rule."""
    cur = await conn.execute(
        f"SELECT {_FIRING}, p.name AS project_name, r.name, r.kind, r.threshold,"
        " r.window_seconds, r.min_tasks, r.task_name, r.queue, r.agent_name, r.webhook_url,"
        " r.emails, r.enabled FROM alert_firings f JOIN alert_rules r ON r.id = f.rule_id"
        " JOIN projects p ON p.id = f.project_id WHERE f.owed ORDER BY f.started_at LIMIT 200"
    )
    return list(await cur.fetchall())


async def record_delivery(
    conn: Conn, firing_id: uuid.UUID, notices: dict[str, Any], failed: str | None, owed: bool
) -> None:
    """After a delivery round: what was delivered, whether it failed somewhere, and whether a
    notice is still owed."""
    await conn.execute(
        "UPDATE alert_firings SET notices = %s, attempts = attempts + %s,"
        " last_error = COALESCE(%s, last_error), owed = %s WHERE id = %s",
        (Jsonb(notices), 1 if failed else 0, failed[:500] if failed else None, owed, firing_id),
    )
