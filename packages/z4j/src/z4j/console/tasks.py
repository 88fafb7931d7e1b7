"""Task pages: the filtered list with its live table, and one task with its timeline."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlencode

from fastapi import APIRouter, Request
from starlette.responses import Response

from z4j.actions import agents, tasks
from z4j.api.v1.deps import require_ctx
from z4j.api.v1.task_query import build_filters, parse_limit
from z4j.console.projects import stream_url
from z4j.console.render import render, render_fragment, wants_fragment
from z4j.domain.notices import unreported_start
from z4j.domain.task_story import result_of, retries_of
from z4j.domain.taskstate import TaskState, is_retriable
from z4j.store.tasks_read import TASK_STATES, Cursor

router = APIRouter(include_in_schema=False)
_FILTER_KEYS = ("name", "queue", "agent_id", "since", "until", "time_field", "q", "limit")


def _link(base: str, params: list[tuple[str, str]], cursor: Cursor | None) -> str | None:
    if cursor is None:
        return None
    return f"{base}?{urlencode([*params, ('cursor', cursor.encode())])}"


@router.get("/projects/{project_id}/tasks")
async def task_list(request: Request, project_id: uuid.UUID) -> Response:
    ctx = require_ctx(request)
    query = request.query_params
    raw = {key: query.get(key, "") for key in _FILTER_KEYS}
    states = [s for value in query.getlist("state") for s in value.split(",") if s]
    filters = build_filters(
        state=states,
        name=raw["name"],
        queue=raw["queue"],
        agent_id=raw["agent_id"],
        since=raw["since"],
        until=raw["until"],
        time_field=raw["time_field"],
        q=raw["q"],
    )
    limit = parse_limit(raw["limit"], tasks.DEFAULT_LIMIT)
    result = await tasks.list_tasks(ctx, project_id, filters, query.get("cursor") or None, limit)
    kept = [("state", s) for s in states] + [(k, v) for k, v in raw.items() if v]
    base = f"/projects/{project_id}/tasks"
    context: dict[str, Any] = {
        "project": result.access.project,
        "access": result.access,
        "page": result.page,
        "older_url": _link(base, kept, result.page.older),
        "newer_url": _link(base, kept, result.page.newer),
        "first_url": f"{base}?{urlencode(kept)}" if query.get("cursor") else None,
        "filters": result.filters,
        "raw": raw,
        "states": states,
        "all_states": TASK_STATES,
        "filtered": bool(kept),
    }
    if wants_fragment(request):
        return render_fragment(request, "_tasks_table.html", **context)
    _access, agent_rows = await agents.list_agents(ctx, project_id)
    return render(
        request,
        "tasks.html",
        stream_url=stream_url(project_id),
        section="tasks",
        agents=agent_rows,
        **context,
    )


@router.get("/projects/{project_id}/tasks/{task_id}")
async def task_detail(request: Request, project_id: uuid.UUID, task_id: uuid.UUID) -> Response:
    ctx = require_ctx(request)
    detail = await tasks.access_task(ctx, project_id, task_id)
    task = detail.task
    has_result, result = result_of(detail.events)
    context: dict[str, Any] = {
        "project": detail.access.project,
        "access": detail.access,
        "task": task,
        "events": detail.events,
        "notice": unreported_start(
            TaskState(task["state"]),
            task["worker"],
            task["enqueued_at"],
            datetime.now(UTC),
            timedelta(seconds=ctx.brain.settings.no_start_after_seconds),
        ),
        "retriable": is_retriable(TaskState(task["state"])),  # Retry is the page's first action
        "retry_of": detail.retry_of,
        "commands": detail.commands,
        "has_result": has_result,
        "result": result,
        "retry_reasons": retries_of(detail.events),
    }
    if wants_fragment(request):
        return render_fragment(request, "_task_body.html", **context)
    return render(
        request, "task.html", stream_url=stream_url(project_id), section="tasks", **context
    )
