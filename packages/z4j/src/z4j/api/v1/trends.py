"""Trends of a project's finished tasks: per bucket of a window, and per task name and queue."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Query
from pydantic import BaseModel, Field

from z4j.actions import trends
from z4j.api.v1.deps import CtxDep
from z4j.domain.trends import WINDOWS, Bucket

router = APIRouter(tags=["trends"])


class BucketOut(BaseModel):
    start: datetime
    finished: int = Field(description="Tasks that succeeded or failed in the bucket")
    failed: int
    failure_rate: float | None = Field(description="Percent of finished tasks that failed")
    runtime_p50_ms: float | None
    runtime_p95_ms: float | None


class GroupOut(BaseModel):
    key: str = Field(description="The task name or queue")
    finished: int
    failed: int
    failure_rate: float | None
    runtime_p50_ms: float | None
    runtime_p95_ms: float | None


class TrendsOut(BaseModel):
    window: str
    step_seconds: int
    since: datetime
    until: datetime
    name: str | None
    queue: str | None
    finished: int
    failed: int
    failure_rate: float | None
    buckets: list[BucketOut]
    by_name: list[GroupOut] = Field(description="The window's busiest task names (at most 20)")
    by_queue: list[GroupOut] = Field(description="The window's busiest queues (at most 20)")


def _group(row: dict[str, Any]) -> GroupOut:
    finished, failed = int(str(row["finished"])), int(str(row["failed"]))
    return GroupOut(
        key=str(row["key"]), finished=finished, failed=failed,
        failure_rate=100.0 * failed / finished if finished else None,
        runtime_p50_ms=row["p50_ms"], runtime_p95_ms=row["p95_ms"],
    )  # fmt: skip


def _bucket(b: Bucket) -> BucketOut:
    return BucketOut(
        start=b.start, finished=b.finished, failed=b.failed, failure_rate=b.failure_rate,
        runtime_p50_ms=b.p50_ms, runtime_p95_ms=b.p95_ms,
    )  # fmt: skip


@router.get("/projects/{project_id}/trends", summary="Throughput, failure rate and runtimes")
async def get_trends(
    project_id: uuid.UUID,
    ctx: CtxDep,
    window: Annotated[str, Query(max_length=8, description=f"One of {', '.join(WINDOWS)}")] = "24h",
    name: Annotated[str | None, Query(max_length=500, description="One task name")] = None,
    queue: Annotated[str | None, Query(max_length=200, description="One queue")] = None,
) -> TrendsOut:
    view = await trends.read(ctx, project_id, window, name=name, queue=queue)
    return TrendsOut(
        window=view.window.key,
        step_seconds=int(view.window.step.total_seconds()),
        since=view.since,
        until=view.until,
        name=view.name,
        queue=view.queue,
        finished=view.totals.finished,
        failed=view.totals.failed,
        failure_rate=view.totals.failure_rate,
        buckets=[_bucket(b) for b in view.buckets],
        by_name=[_group(r) for r in view.by_name],
        by_queue=[_group(r) for r in view.by_queue],
    )
