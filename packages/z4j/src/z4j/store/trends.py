"""Trend SQL: a project's finished tasks in a window, per bucket, per task name and per queue,
in one pass.

The window is one range of ``tasks_project_finished`` (project, finish time, with state,
runtime, name and queue carried in the index), narrowed by name or queue; ``GROUPING SETS``
aggregates the rows it reads three ways at once, and one ``percentile_cont`` over an array of
fractions sorts each group's runtimes once for both percentiles (it skips missing runtimes).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from platformkit.db.scope import Conn

from z4j.domain.trends import EPOCH, Bucket

# GROUPING(start, name, queue): the bit of each column aggregated away
BY_BUCKET, BY_NAME, BY_QUEUE = 0b011, 0b101, 0b110


@dataclass
class Grouped:
    buckets: list[Bucket] = field(default_factory=list)
    by_name: list[dict[str, Any]] = field(default_factory=list)
    by_queue: list[dict[str, Any]] = field(default_factory=list)


async def grouped(
    conn: Conn,
    project_id: uuid.UUID,
    since: datetime,
    until: datetime,
    step: timedelta,
    *,
    name: str | None = None,
    queue: str | None = None,
    limit: int = 20,
) -> Grouped:
    """Buckets in time order; the ``limit`` busiest names and queues (key, finished, failed,
    p50_ms, p95_ms)."""
    extra, params = "", {}
    if name is not None:
        extra += " AND name = %(name)s"
        params["name"] = name
    if queue is not None:
        extra += " AND queue = %(queue)s"
        params["queue"] = queue
    cur = await conn.execute(
        "SELECT GROUPING(start, name, queue) AS g, start, name, queue, count(*) AS finished,"
        " count(*) FILTER (WHERE state = 'failed') AS failed,"
        " percentile_cont(ARRAY[0.5, 0.95]) WITHIN GROUP (ORDER BY runtime_ms) AS pct"
        " FROM (SELECT date_bin(%(step)s, finished_at, %(origin)s) AS start, name, queue,"
        " state, runtime_ms FROM tasks WHERE project_id = %(project)s"
        " AND finished_at >= %(since)s AND finished_at < %(until)s"
        f" AND state IN ('succeeded', 'failed'){extra}) AS t"
        " GROUP BY GROUPING SETS ((start), (name), (queue))",
        {"step": step, "origin": EPOCH, "project": project_id, "since": since, "until": until,
         **params},
    )  # fmt: skip
    out = Grouped()
    for r in await cur.fetchall():
        p50, p95 = r["pct"] or (None, None)
        finished, failed = int(r["finished"]), int(r["failed"])
        if r["g"] == BY_BUCKET:
            out.buckets.append(Bucket(r["start"], finished, failed, p50, p95))
            continue
        key = r["name"] if r["g"] == BY_NAME else r["queue"]
        if key is not None:
            row = {"key": key, "finished": finished, "failed": failed, "p50_ms": p50,
                   "p95_ms": p95}  # fmt: skip
            (out.by_name if r["g"] == BY_NAME else out.by_queue).append(row)
    out.buckets.sort(key=lambda b: b.start)
    for rows in (out.by_name, out.by_queue):
        rows.sort(key=lambda row: (-row["finished"], row["key"]))
        del rows[limit:]
    return out
