"""The beat scheduler's routes: an agent reads its project's schedules and claims their runs.

They take the agent's bearer token (``Authorization: Bearer z4ja_...``), like the agent
channel, and never a person's session or API key. ``GET`` answers an ``ETag``; a beat that
sends it back in ``If-None-Match`` gets 304 while nothing it acts on changed. docs/z4j/schedules.md
describes the beat side.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request
from pydantic import AliasChoices, AwareDatetime, BaseModel, ConfigDict, Field
from starlette.responses import JSONResponse, Response
from z4j_agent.protocol import FrameError

from z4j.actions.errors import AgentTokenInvalid, ScheduleNotFound
from z4j.api.agent_session import authenticate
from z4j.api.v1.deps import brain_of
from z4j.ingest import schedule_claims

router = APIRouter(tags=["agents"])


async def agent_of(request: Request) -> dict[str, Any]:
    try:
        return await authenticate(brain_of(request), request.headers.get("authorization"))
    except FrameError:
        raise AgentTokenInvalid() from None


AgentDep = Annotated[dict[str, Any], Depends(agent_of)]


class BeatSchedule(BaseModel):
    id: uuid.UUID
    name: str
    task: str
    args: list[Any]
    # Named through an alias: a field called "kwargs" would shadow the model's own __init__.
    task_kwargs: dict[str, Any] = Field(
        validation_alias=AliasChoices("kwargs"), serialization_alias="kwargs"
    )
    options: dict[str, Any] = Field(description="apply_async options, such as the queue")
    next_run_at: datetime | None = Field(description="When to fire; null: not again")


class BeatSchedules(BaseModel):
    version: str = Field(description="Also the ETag")
    schedules: list[BeatSchedule]


class ClaimIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    slot: AwareDatetime = Field(description="The next_run_at the beat is about to fire")
    task_id: str = Field(min_length=1, max_length=200, pattern=r"^[A-Za-z0-9_.:\-]+$",
                         description="The task id the beat will send the run with")  # fmt: skip


class ClaimOut(BaseModel):
    claimed: bool = Field(description="Send the run only when true")
    next_run_at: datetime | None
    skipped: bool = Field(False, description="The slot is spent: the previous run still runs")


@router.get(
    "/agent/schedules",
    summary="The schedules a beat scheduler of this agent applies",
    responses={304: {"description": "Not changed since the ETag sent in If-None-Match"}},
    response_model=BeatSchedules,
)
async def beat_schedules(request: Request, agent: AgentDep) -> Response:
    found = await schedule_claims.for_agent(brain_of(request), agent)
    etag = f'"{found.version}"'
    if request.headers.get("if-none-match") == etag:
        return Response(status_code=304, headers={"ETag": etag})
    body = BeatSchedules.model_validate({"version": found.version, "schedules": found.schedules})
    return JSONResponse(body.model_dump(mode="json", by_alias=True), headers={"ETag": etag})


@router.post(
    "/agent/schedules/{schedule_id}/claim",
    summary="Claim a run before sending it: only one beat wins each slot",
)
async def claim_run(
    request: Request, schedule_id: uuid.UUID, body: ClaimIn, agent: AgentDep
) -> ClaimOut:
    result = await schedule_claims.claim_slot(
        brain_of(request), agent, schedule_id, body.slot, body.task_id
    )
    if not result.found:
        raise ScheduleNotFound(schedule_id=str(schedule_id))
    return ClaimOut(claimed=result.claimed, next_run_at=result.next_run_at, skipped=result.skipped)


class ReportedEntry(BaseModel):
    name: str = Field(min_length=1, max_length=200)
    task: str = Field(min_length=1, max_length=500)
    schedule_type: str = Field(max_length=20, description="cron, interval or date")
    expression: str = Field(min_length=1, max_length=200)
    timezone: str | None = Field(None, max_length=64)
    args: list[Any] = Field(default_factory=list, max_length=1000)
    task_kwargs: dict[str, Any] = Field(
        default_factory=dict,
        validation_alias=AliasChoices("kwargs"),
        serialization_alias="kwargs",
    )
    queue: str | None = Field(None, max_length=200)


class ReportIn(BaseModel):
    schedules: list[ReportedEntry] = Field(max_length=500)


class Rejected(BaseModel):
    name: str
    field: str
    reason: str


class ReportOut(BaseModel):
    created: list[str] = Field(description="New schedules, run by the brain's beat from now on")
    existing: list[str] = Field(description="Names the project has: left as they are")
    rejected: list[Rejected]


@router.post(
    "/agent/schedules/report",
    summary="The app's own beat_schedule, found by a starting beat: adds the ones not yet kept",
)
async def report_beat_schedule(request: Request, body: ReportIn, agent: AgentDep) -> ReportOut:
    items = [entry.model_dump(by_alias=True, exclude_none=True) for entry in body.schedules]
    found = await schedule_claims.report(brain_of(request), agent, items)
    return ReportOut.model_validate(
        {"created": found.created, "existing": found.existing, "rejected": found.rejected}
    )
