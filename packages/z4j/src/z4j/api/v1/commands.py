"""Commands to agents: retry and cancel a task, purge a queue, rate-limit a task name, resize
or restart a worker's pool, and the commands' lifecycle. Issuing needs the operator role.

Every issuing route answers 202 with the command as queued; its ``status`` moves on as the
agent acknowledges and reports (``GET .../commands/{id}``)."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Query, status
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field

from z4j.actions import bulk_retries, commands
from z4j.api.v1.deps import CtxDep
from z4j.api.v1.task_query import build_filters
from z4j.domain.commands import DEFAULT_TIMEOUT_SECONDS, MAX_TIMEOUT_SECONDS

router = APIRouter(tags=["commands"])
_Timeout = Field(DEFAULT_TIMEOUT_SECONDS, ge=1, le=MAX_TIMEOUT_SECONDS)


class CommandOut(BaseModel):
    id: uuid.UUID
    agent_id: uuid.UUID | None
    task_id: uuid.UUID | None
    action: str
    target: dict[str, Any]
    parameters: dict[str, Any]
    status: str = Field(description="queued, sent, acknowledged, succeeded, failed or timed_out")
    result: dict[str, Any] | None
    error: str | None
    issued_by: uuid.UUID | None
    timeout_seconds: int
    deadline_at: datetime
    sent_at: datetime | None
    acknowledged_at: datetime | None
    finished_at: datetime | None
    created_at: datetime


class RetryIn(BaseModel):
    override_args: list[Any] | None = Field(
        None, max_length=1000, description="Run with these positional arguments instead"
    )
    override_kwargs: dict[str, Any] | None = Field(
        None, description="Run with these keyword arguments instead"
    )
    timeout_seconds: int = _Timeout


class CancelIn(BaseModel):
    terminate: bool = Field(False, description="Also stop it with SIGTERM if it is running")
    timeout_seconds: int = _Timeout


class PurgeIn(BaseModel):
    queue: str = Field(min_length=1, max_length=200)
    confirm: str = Field(max_length=200, description="The queue's name again, typed")
    expected_depth: int | None = Field(
        None,
        ge=0,
        le=2**31 - 1,
        description="The depth the operator saw; the agent purges only if it still is "
        "(the z4j-celery agent requires it)",
    )


class RateLimitIn(BaseModel):
    task_name: str = Field(min_length=1, max_length=500)
    rate: str = Field(max_length=32, description="e.g. 10/m, 2/s, 100/h; 0 lifts the limit")
    worker: str | None = Field(None, max_length=200, description="One worker node, or all")


class PoolIn(BaseModel):
    worker: str = Field(min_length=1, max_length=200)
    delta: int = Field(ge=-64, le=64, description="Processes to add (> 0) or remove (< 0)")


class WorkerIn(BaseModel):
    worker: str = Field(min_length=1, max_length=200)


def _out(row: dict[str, Any]) -> CommandOut:
    return CommandOut.model_validate(row)


_ACCEPTED: dict[str, Any] = {"status_code": status.HTTP_202_ACCEPTED}


@router.post(
    "/projects/{project_id}/tasks/{task_id}/retry",
    summary="Run a task again (a new task, linked by retried_as)",
    **_ACCEPTED,
)
async def retry_task(
    project_id: uuid.UUID, task_id: uuid.UUID, ctx: CtxDep, body: RetryIn | None = None
) -> CommandOut:
    body = body or RetryIn()
    return _out(
        await commands.retry_task(
            ctx,
            project_id,
            task_id,
            override_args=body.override_args,
            override_kwargs=body.override_kwargs,
            timeout_seconds=body.timeout_seconds,
        )
    )


@router.post(
    "/projects/{project_id}/tasks/{task_id}/cancel",
    summary="Revoke a task; with terminate, stop it if it runs",
    **_ACCEPTED,
)
async def cancel_task(
    project_id: uuid.UUID, task_id: uuid.UUID, ctx: CtxDep, body: CancelIn | None = None
) -> CommandOut:
    body = body or CancelIn()
    return _out(
        await commands.cancel_task(
            ctx, project_id, task_id, terminate=body.terminate, timeout_seconds=body.timeout_seconds
        )
    )


@router.post(
    "/projects/{project_id}/queues/purge",
    summary="Delete every waiting message of a queue (confirm repeats its name)",
    **_ACCEPTED,
)
async def purge_queue(project_id: uuid.UUID, body: PurgeIn, ctx: CtxDep) -> CommandOut:
    return _out(
        await commands.purge_queue(
            ctx, project_id, body.queue, body.confirm, expected_depth=body.expected_depth
        )
    )


@router.post(
    "/projects/{project_id}/rate-limits",
    summary="Set the rate limit of a task name on the workers",
    **_ACCEPTED,
)
async def rate_limit(project_id: uuid.UUID, body: RateLimitIn, ctx: CtxDep) -> CommandOut:
    return _out(await commands.rate_limit(ctx, project_id, body.task_name, body.rate, body.worker))


@router.post(
    "/projects/{project_id}/workers/pool",
    summary="Grow or shrink a worker's pool",
    **_ACCEPTED,
)
async def resize_pool(project_id: uuid.UUID, body: PoolIn, ctx: CtxDep) -> CommandOut:
    return _out(await commands.resize_pool(ctx, project_id, body.worker, body.delta))


@router.post(
    "/projects/{project_id}/workers/restart",
    summary="Restart a worker's pool processes",
    **_ACCEPTED,
)
async def restart_worker(project_id: uuid.UUID, body: WorkerIn, ctx: CtxDep) -> CommandOut:
    return _out(await commands.restart_worker(ctx, project_id, body.worker))


@router.get("/projects/{project_id}/commands", summary="Commands, newest first")
async def list_commands(
    project_id: uuid.UUID,
    ctx: CtxDep,
    task_id: Annotated[uuid.UUID | None, Query()] = None,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
) -> list[CommandOut]:
    return [_out(r) for r in await commands.list_commands(ctx, project_id, task_id, limit)]


@router.get("/projects/{project_id}/commands/{command_id}", summary="One command")
async def get_command(project_id: uuid.UUID, command_id: uuid.UUID, ctx: CtxDep) -> CommandOut:
    return _out(await commands.access_command(ctx, project_id, command_id))


class BulkRetryIn(BaseModel):
    max: int = Field(100, ge=1, le=bulk_retries.MAX_BULK, description="Retry at most this many")
    dry_run: bool = Field(False, description="Only count the matching tasks")


class BulkRetryOut(BaseModel):
    id: uuid.UUID
    status: str = Field(description="running, done or stopped")
    filters: dict[str, Any]
    total: int = Field(description="Tasks selected when it started")
    processed: int = Field(description="Tasks handled so far (retried or skipped)")
    skipped: int = Field(description="Tasks gone, or whose agent cannot retry")
    commands: dict[str, int] = Field(description="Its retry commands by status")
    error: str | None
    created_at: datetime
    finished_at: datetime | None


class BulkPreviewOut(BaseModel):
    count: int
    more: bool = Field(description="More tasks match than max")
    max: int


@router.post(
    "/projects/{project_id}/tasks/bulk-retry",
    summary="Retry the tasks the list's filters match (dry_run: count them first)",
    responses={202: {"model": BulkRetryOut}},
)
async def bulk_retry(
    project_id: uuid.UUID,
    ctx: CtxDep,
    body: BulkRetryIn,
    state: Annotated[list[str] | None, Query()] = None,
    name: Annotated[str | None, Query(max_length=501)] = None,
    queue: Annotated[str | None, Query(max_length=200)] = None,
    agent_id: Annotated[str | None, Query()] = None,
    since: Annotated[str | None, Query()] = None,
    until: Annotated[str | None, Query()] = None,
    time_field: Annotated[str | None, Query()] = None,
    q: Annotated[str | None, Query()] = None,
) -> Any:
    filters = build_filters(
        state=state or (), name=name, queue=queue, agent_id=agent_id, since=since, until=until,
        time_field=time_field, q=q,
    )  # fmt: skip
    if body.dry_run:
        return BulkPreviewOut(**await bulk_retries.preview(ctx, project_id, filters, body.max))
    started = await bulk_retries.start(ctx, project_id, filters, body.max)
    return JSONResponse(
        BulkRetryOut(**started).model_dump(mode="json"), status_code=status.HTTP_202_ACCEPTED
    )


@router.get("/projects/{project_id}/bulk-retries/{bulk_id}", summary="A bulk retry's progress")
async def get_bulk_retry(project_id: uuid.UUID, bulk_id: uuid.UUID, ctx: CtxDep) -> BulkRetryOut:
    return BulkRetryOut(**await bulk_retries.access_bulk_retry(ctx, project_id, bulk_id))


class OverviewOut(BaseModel):
    live: str | None = Field(
        description="The read through the agent: succeeded, another status when it did not "
        "answer in time, or null when no agent offers it (rows then hold recorded figures only)"
    )
    items: list[dict[str, Any]]


@router.get("/projects/{project_id}/queues", summary="Queues: depth now (through an agent), rates")
async def queues(project_id: uuid.UUID, ctx: CtxDep) -> OverviewOut:
    read, rows = await commands.queue_overview(ctx, project_id)
    return OverviewOut(live=read["status"] if read else None, items=rows)


@router.get(
    "/projects/{project_id}/workers",
    summary="Workers: pool, concurrency, active and processed now (through an agent), outcomes",
)
async def workers(project_id: uuid.UUID, ctx: CtxDep) -> OverviewOut:
    read, rows = await commands.worker_overview(ctx, project_id)
    return OverviewOut(live=read["status"] if read else None, items=rows)
