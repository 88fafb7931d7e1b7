"""A project's retention settings (how long tasks and events are kept, its time zone) and the
retention controller's last run."""

from __future__ import annotations

import uuid
from datetime import datetime

from fastapi import APIRouter
from pydantic import BaseModel, ConfigDict, Field, StrictInt

from z4j.actions import retention
from z4j.api.v1.deps import CtxDep
from z4j.domain.retention import Retention

router = APIRouter(tags=["retention"])


class RetentionIn(BaseModel):
    """Only the keys given change. Days are 1 to 3650; events are kept no longer than tasks."""

    model_config = ConfigDict(extra="forbid")
    task_retention_days: StrictInt | None = None
    event_retention_days: StrictInt | None = None
    timezone: str | None = Field(None, max_length=64, description="An IANA zone name")
    redact_keys: list[str] | None = Field(
        None, max_length=50, description="Key names masked in this project's events, beside the "
        "built-in ones (1-100 letters, digits, '_', '.', '-')",
    )  # fmt: skip


class LastRunOut(BaseModel):
    last_run_at: datetime
    tasks_deleted: int
    events_deleted: int
    backlog: int = Field(description="Expired rows left when the run stopped (counted to 100,000)")
    total_deleted: int


class RetentionOut(BaseModel):
    task_retention_days: int
    event_retention_days: int
    timezone: str
    redact_keys: list[str]
    last_run: LastRunOut | None


def _out(settings: Retention, last_run: dict[str, object] | None) -> RetentionOut:
    return RetentionOut(
        task_retention_days=settings.task_days,
        event_retention_days=settings.event_days,
        timezone=settings.timezone,
        redact_keys=list(settings.redact_keys),
        last_run=LastRunOut.model_validate(last_run) if last_run else None,
    )


@router.get("/projects/{project_id}/retention", summary="Retention settings and the last run")
async def get_retention(project_id: uuid.UUID, ctx: CtxDep) -> RetentionOut:
    view = await retention.read(ctx, project_id)
    return _out(view.retention, view.last_run)


@router.put(
    "/projects/{project_id}/retention", summary="Change retention settings (admins and owners)"
)
async def put_retention(project_id: uuid.UUID, body: RetentionIn, ctx: CtxDep) -> RetentionOut:
    await retention.change(ctx, project_id, body.model_dump(exclude_none=True))
    view = await retention.read(ctx, project_id)
    return _out(view.retention, view.last_run)
