"""The analytics questions, each a function of the tenant (a required argument that every
query filters on first, matching every table's ORDER BY) and answered from ClickHouse:

- ``conversation_trace``: every event of a conversation's messages, grouped by hop (message),
  with each hop's stage timings and the gap since the hop before;
- ``cost``: spend and tokens per agent, task, model or day, split by who reported it;
- ``talk_graph``: who sent to whom, weighted by messages and bytes, with dead letters;
- ``latency``: percentiles per stage (accept, publish, deliver, read) against the SLO.

Times are UTC; ``since`` and ``until`` bound the rows' own time (event or usage time).
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from agentbus.analytics.backends import Backend
from agentbus.analytics.timeline import hops

Row = dict[str, Any]

STAGES = {
    "accept": "message.accepted",
    "publish": "message.published",
    "deliver": "message.delivered",
    "read": "message.read",
}
COST_BY = ("agent", "task", "model", "day")


def _ts(at: datetime) -> str:
    return at.replace(tzinfo=None).isoformat(sep=" ", timespec="milliseconds")


def _window(tenant_id: uuid.UUID, since: datetime, until: datetime) -> dict[str, Any]:
    return {"t": str(tenant_id), "since": _ts(since), "until": _ts(until)}


async def conversation_trace(
    backend: Backend, tenant_id: uuid.UUID, conversation_id: uuid.UUID
) -> dict[str, Any] | None:
    """The conversation's hops in order, or None when the tenant has no event of it."""
    rows = await backend.select(
        """SELECT toString(message_id) AS message_id, event,
                  formatDateTime(event_time, '%Y-%m-%dT%H:%i:%S.%fZ') AS at,
                  toUnixTimestamp64Milli(event_time) AS at_ms, attempt, actor, latency_ms,
                  error_code, toString(from_agent_id) AS from_agent_id,
                  toString(to_agent_id) AS to_agent_id, type, toString(task_id) AS task_id,
                  trace_id, details
             FROM agentbus.events
            WHERE tenant_id = {t:UUID} AND conversation_id = {c:UUID}
            ORDER BY event_time, message_id, event""",
        {"t": str(tenant_id), "c": str(conversation_id)},
    )
    if not rows:
        return None
    return hops(rows)


async def cost(
    backend: Backend, tenant_id: uuid.UUID, by: str, since: datetime, until: datetime
) -> list[Row]:
    """Spend per ``by`` (agent, task, model, day) and ``reported_by``, largest first; costs as
    decimal text. Agent, model and day read ``mv_cost_daily``; task reads ``usage`` (the view
    has no task)."""
    if by not in COST_BY:
        raise ValueError(f"cost by {by!r}")
    if by == "task":
        sql = """SELECT toString(task_id) AS key, reported_by,
                        toString(sum(cost_usd)) AS usd, sum(input_tokens) AS input_tokens,
                        sum(output_tokens) AS output_tokens,
                        sum(cache_read_tokens) AS cache_read_tokens
                   FROM agentbus.usage
                  WHERE tenant_id = {t:UUID} AND task_id IS NOT NULL
                    AND recorded_at >= {since:DateTime64(3, 'UTC')}
                    AND recorded_at < {until:DateTime64(3, 'UTC')}
                  GROUP BY key, reported_by ORDER BY sum(cost_usd) DESC, key, reported_by"""
    else:
        key = {"agent": "toString(agent_id)", "model": "model", "day": "toString(day)"}[by]
        sql = f"""SELECT {key} AS key, reported_by,
                         toString(sum(cost_usd)) AS usd, sum(input_tokens) AS input_tokens,
                         sum(output_tokens) AS output_tokens,
                         sum(cache_read_tokens) AS cache_read_tokens
                    FROM agentbus.mv_cost_daily
                   WHERE tenant_id = {{t:UUID}}
                     AND day >= toDate({{since:DateTime64(3, 'UTC')}})
                     AND day <= toDate({{until:DateTime64(3, 'UTC')}})
                   GROUP BY key, reported_by
                   ORDER BY {"key" if by == "day" else "sum(cost_usd) DESC, key"}, reported_by"""
    rows = await backend.select(sql, _window(tenant_id, since, until))
    for row in rows:  # an alias named like the column would shadow it inside sum()
        row["cost_usd"] = row.pop("usd")
    return rows


async def talk_graph(
    backend: Backend, tenant_id: uuid.UUID, since: datetime, until: datetime
) -> dict[str, Any]:
    """Directed edges (sender -> recipient) weighted by messages and bytes, with dead letters
    and expiries, and the nodes with what each sent and received."""
    edges = await backend.select(
        """SELECT toString(from_agent_id) AS source, toString(to_agent_id) AS target,
                  sum(messages) AS n, sum(bytes) AS b, sum(dead_lettered) AS dead,
                  sum(expired) AS gone
             FROM agentbus.mv_edges_daily
            WHERE tenant_id = {t:UUID} AND day >= toDate({since:DateTime64(3, 'UTC')})
              AND day <= toDate({until:DateTime64(3, 'UTC')})
            GROUP BY source, target ORDER BY n DESC, source, target""",
        _window(tenant_id, since, until),
    )
    # the view counts a message once when accepted and again if it is dead-lettered or expires
    edges = [{"source": e["source"], "target": e["target"],
              "messages": int(e["n"]) - int(e["dead"]) - int(e["gone"]), "bytes": int(e["b"]),
              "dead_lettered": int(e["dead"]), "expired": int(e["gone"])}
             for e in edges]  # fmt: skip
    nodes: dict[str, Row] = {}
    for edge in edges:
        for end, field in ((edge["source"], "sent"), (edge["target"], "received")):
            node = nodes.setdefault(end, {"id": end, "sent": 0, "received": 0})
            node[field] += int(edge["messages"])
    return {"nodes": sorted(nodes.values(), key=lambda n: n["id"]), "edges": edges}


async def latency(
    backend: Backend, tenant_id: uuid.UUID, since: datetime, until: datetime, slo_ms: int
) -> list[Row]:
    """Per stage: how many, p50/p95/p99 in ms, and the share within ``slo_ms``."""
    rows = await backend.select(
        """SELECT event, count() AS n, quantilesExact(0.5, 0.95, 0.99)(latency_ms) AS q,
                  countIf(latency_ms <= {slo:UInt32}) AS within
             FROM agentbus.events
            WHERE tenant_id = {t:UUID} AND event IN {events:Array(String)}
              AND latency_ms IS NOT NULL
              AND event_time >= {since:DateTime64(3, 'UTC')}
              AND event_time < {until:DateTime64(3, 'UTC')}
            GROUP BY event""",
        {**_window(tenant_id, since, until), "slo": slo_ms, "events": list(STAGES.values())},
    )
    by_event = {r["event"]: r for r in rows}
    out: list[Row] = []
    for stage, event in STAGES.items():
        row = by_event.get(event)
        n = int(row["n"]) if row else 0
        q = [int(v) for v in row["q"]] if row else [None, None, None]
        within = int(row["within"]) if row else 0
        p95 = q[1]
        out.append({"stage": stage, "event": event, "count": n, "p50_ms": q[0], "p95_ms": p95,
                    "p99_ms": q[2], "slo_ms": slo_ms,
                    "within_slo": None if n == 0 else round(within / n, 4),
                    "meets_slo": None if p95 is None else p95 <= slo_ms})  # fmt: skip
    return out
