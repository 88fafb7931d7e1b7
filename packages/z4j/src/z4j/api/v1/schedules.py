"""A project's schedules: cron, interval and date runs of a task that the brain's beat
scheduler fires (docs/z4j/schedules.md). Reading needs a member; writing needs an operator."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from fastapi import APIRouter, status
from pydantic import AliasChoices, BaseModel, ConfigDict, Field, StrictBool

from z4j.actions import schedules
from z4j.api.v1.deps import CtxDep
from z4j.domain.schedules import Kind

router = APIRouter(tags=["schedules"])
_EXPRESSION = (
    "cron: five fields (minute hour day month weekday); interval: 30s, 5m, 1h30m, 1d or "
    "seconds; date: ISO 8601, e.g. 2027-01-31T09:00 (without offset: on the time zone)"
)


class ScheduleOut(BaseModel):
    id: uuid.UUID
    name: str
    task: str
    schedule_type: Kind
    expression: str
    timezone: str
    queue: str | None
    args: list[Any]
    # Named through an alias: a field called "kwargs" would shadow the model's own __init__.
    task_kwargs: dict[str, Any] = Field(
        validation_alias=AliasChoices("kwargs"), serialization_alias="kwargs"
    )
    enabled: bool
    agent_id: uuid.UUID | None = Field(description="Only this agent's beat fires it; null: any")
    scheduler: str
    last_run_at: datetime | None
    next_run_at: datetime | None = Field(description="null: disabled, or a date that fired")
    last_task_id: str | None = Field(description="The task id the last run was sent with")
    last_task: uuid.UUID | None = Field(description="That task in the brain, once reported")
    last_task_state: str | None
    total_run_count: int
    skip_if_running: bool = Field(description="A due run is skipped while the last one runs")
    skipped_count: int = Field(description="Due runs skipped, the last one still running")
    source: str | None = Field(description="beat_schedule: reported from the app's own")
    created_at: datetime
    updated_at: datetime


class ScheduleIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field(min_length=1, max_length=200)
    task: str = Field(min_length=1, max_length=500, description="The Celery task name")
    schedule_type: Kind
    expression: str = Field(min_length=1, max_length=200, description=_EXPRESSION)
    args: list[Any] = Field(default_factory=list, max_length=1000)
    task_kwargs: dict[str, Any] = Field(
        default_factory=dict, validation_alias=AliasChoices("kwargs"), serialization_alias="kwargs"
    )
    enabled: StrictBool = True
    timezone: str | None = Field(
        None, max_length=64, description="IANA name; default the project's"
    )
    queue: str | None = Field(None, max_length=200, description="Send to this queue")
    agent_id: uuid.UUID | None = Field(None, description="Only this agent's beat fires it")
    skip_if_running: StrictBool = Field(
        False, description="Skip a due run while the last one has not finished"
    )


class ScheduleChange(BaseModel):
    """Only the fields given change."""

    model_config = ConfigDict(extra="forbid")
    name: str | None = Field(None, min_length=1, max_length=200)
    task: str | None = Field(None, min_length=1, max_length=500)
    schedule_type: Kind | None = None
    expression: str | None = Field(None, min_length=1, max_length=200, description=_EXPRESSION)
    args: list[Any] | None = Field(None, max_length=1000)
    task_kwargs: dict[str, Any] | None = Field(
        None, validation_alias=AliasChoices("kwargs"), serialization_alias="kwargs"
    )
    enabled: StrictBool | None = None
    timezone: str | None = Field(None, max_length=64)
    queue: str | None = Field(None, max_length=200, description="An empty string clears it")
    agent_id: uuid.UUID | None = None
    skip_if_running: StrictBool | None = None


def out(row: dict[str, Any]) -> ScheduleOut:
    meta = row["metadata"]
    return ScheduleOut.model_validate(
        row
        | {
            "timezone": meta.get("timezone", "UTC"),
            "queue": meta.get("queue"),
            "last_task_id": meta.get("last_task_id"),
            "last_task": row.get("last_task"),
            "last_task_state": row.get("last_task_state"),
            "total_run_count": int(meta.get("total_run_count", 0)),
            "source": meta.get("source"),
            "skip_if_running": meta.get("skip_if_running") is True,
            "skipped_count": int(meta.get("skipped_count", 0)),
        }
    )


_BASE = "/projects/{project_id}/schedules"


@router.get(_BASE, summary="The project's schedules, by name")
async def list_schedules(project_id: uuid.UUID, ctx: CtxDep) -> list[ScheduleOut]:
    _access, rows = await schedules.list_schedules(ctx, project_id)
    return [out(row) for row in rows]


@router.post(_BASE, summary="Create a schedule", status_code=status.HTTP_201_CREATED)
async def create_schedule(project_id: uuid.UUID, body: ScheduleIn, ctx: CtxDep) -> ScheduleOut:
    values = body.model_dump(exclude_none=True, by_alias=True)
    return out(await schedules.create_schedule(ctx, project_id, values))


@router.get(_BASE + "/{schedule_id}", summary="One schedule")
async def get_schedule(project_id: uuid.UUID, schedule_id: uuid.UUID, ctx: CtxDep) -> ScheduleOut:
    return out(await schedules.get_schedule(ctx, project_id, schedule_id))


@router.patch(_BASE + "/{schedule_id}", summary="Change a schedule's fields")
async def update_schedule(
    project_id: uuid.UUID, schedule_id: uuid.UUID, body: ScheduleChange, ctx: CtxDep
) -> ScheduleOut:
    changes = body.model_dump(exclude_unset=True, by_alias=True)
    return out(await schedules.update_schedule(ctx, project_id, schedule_id, changes))


@router.post(_BASE + "/{schedule_id}/enable", summary="Enable: it runs at its next time")
async def enable(project_id: uuid.UUID, schedule_id: uuid.UUID, ctx: CtxDep) -> ScheduleOut:
    return out(await schedules.set_enabled(ctx, project_id, schedule_id, True))


@router.post(_BASE + "/{schedule_id}/disable", summary="Disable: no more runs until enabled")
async def disable(project_id: uuid.UUID, schedule_id: uuid.UUID, ctx: CtxDep) -> ScheduleOut:
    return out(await schedules.set_enabled(ctx, project_id, schedule_id, False))


@router.post(
    _BASE + "/{schedule_id}/run",
    summary="Run now: the beat fires it on its next sync (an enabled schedule)",
    status_code=status.HTTP_202_ACCEPTED,
)
async def run_now(project_id: uuid.UUID, schedule_id: uuid.UUID, ctx: CtxDep) -> ScheduleOut:
    return out(await schedules.run_now(ctx, project_id, schedule_id))


@router.delete(
    _BASE + "/{schedule_id}", summary="Delete a schedule", status_code=status.HTTP_204_NO_CONTENT
)
async def delete_schedule(project_id: uuid.UUID, schedule_id: uuid.UUID, ctx: CtxDep) -> None:
    await schedules.delete_schedule(ctx, project_id, schedule_id)
