"""Reading trends: throughput, failure rate and runtime percentiles of a project's finished
tasks over a window, for all tasks or one task name or queue, and the busiest names and queues
among them. Needs ``project.read``; docs/z4j/trends-and-alerts.md is the manual."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from z4j.actions.access import ProjectAccess, project_scope
from z4j.actions.context import Ctx
from z4j.actions.errors import InvalidInput
from z4j.domain import trends
from z4j.domain.trends import Bucket, Totals, Window
from z4j.store import trends as store

BREAKDOWN_LIMIT = 20
MAX_KEY = 500


@dataclass(frozen=True)
class TrendView:
    access: ProjectAccess
    window: Window
    since: datetime
    until: datetime
    name: str | None
    queue: str | None
    buckets: list[Bucket]
    totals: Totals
    by_name: list[dict[str, Any]]
    by_queue: list[dict[str, Any]]


def _key(value: str | None, field: str) -> str | None:
    if value is None or value == "":
        return None
    if len(value) > MAX_KEY:
        raise InvalidInput(f"{field} is at most {MAX_KEY} characters.", field=field)
    return value


async def read(
    ctx: Ctx,
    project_id: uuid.UUID,
    window: str | None = None,
    *,
    name: str | None = None,
    queue: str | None = None,
    now: datetime | None = None,
) -> TrendView:
    chosen = trends.window_of(window)
    if chosen is None:
        raise InvalidInput(f"window is one of {', '.join(trends.WINDOWS)}.", field="window")
    name, queue = _key(name, "name"), _key(queue, "queue")
    since, until = chosen.bounds(now or datetime.now(UTC))
    async with project_scope(ctx, project_id) as (conn, access):
        found = await store.grouped(
            conn, project_id, since, until, chosen.step, name=name, queue=queue,
            limit=BREAKDOWN_LIMIT,
        )  # fmt: skip
    filled = trends.fill(chosen, since, found.buckets)
    return TrendView(
        access, chosen, since, until, name, queue, filled, trends.totals(filled), found.by_name,
        found.by_queue,
    )  # fmt: skip
