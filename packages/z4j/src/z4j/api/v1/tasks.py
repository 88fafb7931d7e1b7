"""Tasks of a project: the filtered, cursor-paginated list and one task with its timeline."""

from __future__ import annotations

import uuid
from typing import Annotated, Any

from fastapi import APIRouter, Query

from z4j.actions import tasks
from z4j.api.v1.deps import CtxDep
from z4j.api.v1.schemas import TaskDetailOut, TaskError, TaskOut, TaskPage
from z4j.api.v1.task_query import build_filters

router = APIRouter(tags=["tasks"])

_DOC = {
    "state": "pending, started, succeeded, failed, cancelled, retried or lost; repeat or "
    "separate with commas for several",
    "name": "Exact task name, or a prefix ending in * (e.g. billing.*)",
    "since": "ISO 8601 time (inclusive); without offset it is UTC",
    "until": "ISO 8601 time (exclusive)",
    "time_field": "Which time since/until apply to: created (default) or enqueued",
    "q": "Substring of the redacted args/kwargs; without since it searches the last 7 days",
    "cursor": "next_cursor or prev_cursor of a previous page",
}


@router.get("/projects/{project_id}/tasks", summary="Tasks, newest first, filtered")
async def list_tasks(
    project_id: uuid.UUID,
    ctx: CtxDep,
    state: Annotated[list[str] | None, Query(description=_DOC["state"])] = None,
    name: Annotated[str | None, Query(max_length=501, description=_DOC["name"])] = None,
    queue: Annotated[str | None, Query(max_length=200)] = None,
    agent_id: Annotated[str | None, Query()] = None,
    since: Annotated[str | None, Query(description=_DOC["since"])] = None,
    until: Annotated[str | None, Query(description=_DOC["until"])] = None,
    time_field: Annotated[str | None, Query(description=_DOC["time_field"])] = None,
    q: Annotated[str | None, Query(description=_DOC["q"])] = None,
    cursor: Annotated[str | None, Query(max_length=200, description=_DOC["cursor"])] = None,
    limit: Annotated[int, Query(ge=1, le=tasks.MAX_LIMIT)] = tasks.DEFAULT_LIMIT,
) -> TaskPage:
    filters = build_filters(
        state=state or (),
        name=name,
        queue=queue,
        agent_id=agent_id,
        since=since,
        until=until,
        time_field=time_field,
        q=q,
    )
    result = await tasks.list_tasks(ctx, project_id, filters, cursor, limit)
    page = result.page
    return TaskPage(
        items=[TaskOut.model_validate(row) for row in page.items],
        next_cursor=page.older.encode() if page.older else None,
        prev_cursor=page.newer.encode() if page.newer else None,
        search_since=result.filters.since if q and not since else None,
    )


def _error(value: Any) -> TaskError | None:
    return TaskError.model_validate(value) if isinstance(value, dict) else None


@router.get(
    "/projects/{project_id}/tasks/{task_id}",
    summary="One task with its event timeline (agent time order)",
)
async def get_task(project_id: uuid.UUID, task_id: uuid.UUID, ctx: CtxDep) -> TaskDetailOut:
    detail = await tasks.access_task(ctx, project_id, task_id)
    task = detail.task
    return TaskDetailOut.model_validate(
        {
            **task,
            "args": task["args_redacted"],
            "kwargs": task["kwargs_redacted"],
            "error": _error(task["error"]),
            "retry_of": detail.retry_of,
            "events": detail.events,
        }
    )
