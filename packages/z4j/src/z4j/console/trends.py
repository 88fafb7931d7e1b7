"""The trends page: throughput, failure rate and runtime charts as server-drawn SVG."""

from __future__ import annotations

import uuid
from datetime import timedelta
from urllib.parse import urlencode

from fastapi import APIRouter, Request
from starlette.responses import Response

from z4j.actions import trends
from z4j.api.v1.deps import require_ctx
from z4j.console.render import duration, render, zone_of
from z4j.domain import charts
from z4j.domain.trends import WINDOWS

router = APIRouter(include_in_schema=False)


def _count(value: float) -> str:
    return f"{value:,.0f}" if value >= 10 or value == int(value) else f"{value:.1f}"


def _percent(value: float) -> str:
    return f"{value:.0f} %"


def _ms(value: float) -> str:
    return duration(value) or "0 ms"


@router.get("/projects/{project_id}/trends")
async def trends_page(request: Request, project_id: uuid.UUID) -> Response:
    ctx = require_ctx(request)
    query = request.query_params
    view = await trends.read(
        ctx, project_id, query.get("window") or None,
        name=query.get("name") or None, queue=query.get("queue") or None,
    )  # fmt: skip
    zone = zone_of(view.access.project)
    fmt = "%H:%M" if view.window.span <= timedelta(days=1) else "%m-%d %H:%M"
    labels = [b.start.astimezone(zone).strftime(fmt) for b in view.buckets]
    step_minutes = view.window.step.total_seconds() / 60
    throughput = charts.bar_chart(
        f"Tasks finished per {_step(step_minutes)}", labels,
        [float(b.finished) for b in view.buckets], _count,
    )  # fmt: skip
    failure = charts.line_chart(
        "Failure rate", labels, [("failed", "s-failed", [b.failure_rate for b in view.buckets])],
        _percent, floor_ceiling=10.0,
    )  # fmt: skip
    runtime = charts.line_chart(
        "Runtime", labels,
        [("p50", "s-p50", [b.p50_ms for b in view.buckets]),
         ("p95", "s-p95", [b.p95_ms for b in view.buckets])],
        _ms,
    )  # fmt: skip
    kept = [(k, v) for k, v in (("name", view.name), ("queue", view.queue)) if v]
    base, window = f"/projects/{project_id}/trends", view.window.key
    return render(
        request,
        "trends.html",
        project=view.access.project,
        access=view.access,
        section="trends",
        view=view,
        windows=list(WINDOWS.values()),
        charts=[throughput, failure, runtime],
        window_url=lambda key: f"{base}?{urlencode([('window', key), *kept])}",
        scope_url=lambda key, value: f"{base}?{urlencode([('window', window), (key, value)])}",
        all_url=f"{base}?{urlencode([('window', view.window.key)])}",
    )


def _step(minutes: float) -> str:
    if minutes < 60:
        return f"{minutes:.0f} min"
    return f"{minutes / 60:.0f} h"
