"""Alert rules (read by members, changed by admins and owners) and the project's firings."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from fastapi import APIRouter, status
from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt

from z4j.actions import alerts
from z4j.actions.access import ProjectAccess
from z4j.api.v1.deps import CtxDep
from z4j.domain.alerts import Kind, webhook_masked
from z4j.domain.roles import Permission

router = APIRouter(tags=["alerts"])


class RuleFields(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str | None = Field(None, max_length=200)
    threshold: float | None = Field(
        None, description="Percent (failure_rate), seconds (runtime_p95, backlog_age), or a count"
    )
    window_seconds: StrictInt | None = Field(None, description="60 to 604800; default 300")
    min_tasks: StrictInt | None = Field(
        None, description="Finished tasks a window needs before its value counts; default 1"
    )
    task_name: str | None = Field(None, max_length=500)
    queue: str | None = Field(None, max_length=200)
    agent_name: str | None = Field(None, max_length=200)
    webhook_url: str | None = Field(None, max_length=2000, description="http(s); JSON POST")
    emails: list[str] | None = Field(None, max_length=10)
    enabled: StrictBool | None = None


class RuleIn(RuleFields):
    """A new rule: ``name``, ``kind`` and ``threshold`` are required."""

    kind: Kind


class RuleChange(RuleFields):
    """Only the fields given change."""

    kind: Kind | None = None


class RuleOut(BaseModel):
    id: uuid.UUID
    name: str
    kind: Kind
    threshold: float
    window_seconds: int
    min_tasks: int
    task_name: str | None
    queue: str | None
    agent_name: str | None
    webhook_url: str | None = Field(description="Without its path for those who cannot manage")
    emails: list[str]
    enabled: bool
    firing_since: datetime | None = None
    created_at: datetime
    updated_at: datetime


class FiringOut(BaseModel):
    id: uuid.UUID
    rule_id: uuid.UUID
    rule_name: str
    kind: Kind
    started_at: datetime
    resolved_at: datetime | None
    value: float
    last_value: float | None
    notices: dict[str, Any] = Field(description="Channels each notice reached, and when")
    attempts: int
    last_error: str | None


class AlertsOut(BaseModel):
    rules: list[RuleOut]
    firings: list[FiringOut] = Field(description="The latest 50, newest first")


def _rule(row: dict[str, Any], access: ProjectAccess | None = None) -> RuleOut:
    out = RuleOut.model_validate(row)
    if access is not None and not access.can(Permission.ALERT_MANAGE):
        out.webhook_url = webhook_masked(out.webhook_url)
    return out


@router.get("/projects/{project_id}/alerts", summary="Alert rules and the latest firings")
async def get_alerts(project_id: uuid.UUID, ctx: CtxDep) -> AlertsOut:
    access, rules, firings = await alerts.list_rules(ctx, project_id)
    return AlertsOut(
        rules=[_rule(r, access) for r in rules],
        firings=[FiringOut.model_validate(f) for f in firings],
    )


@router.post(
    "/projects/{project_id}/alert-rules",
    status_code=status.HTTP_201_CREATED,
    summary="Create an alert rule (admins and owners)",
)
async def create_rule(project_id: uuid.UUID, body: RuleIn, ctx: CtxDep) -> RuleOut:
    return _rule(await alerts.create_rule(ctx, project_id, body.model_dump(exclude_none=True)))


@router.patch(
    "/projects/{project_id}/alert-rules/{rule_id}",
    summary="Change an alert rule's given fields (admins and owners)",
)
async def change_rule(
    project_id: uuid.UUID, rule_id: uuid.UUID, body: RuleChange, ctx: CtxDep
) -> RuleOut:
    values = body.model_dump(exclude_unset=True)
    return _rule(await alerts.update_rule(ctx, project_id, rule_id, values))


@router.delete(
    "/projects/{project_id}/alert-rules/{rule_id}",
    status_code=status.HTTP_204_NO_CONTENT,
    summary="Delete an alert rule and its firings (admins and owners)",
)
async def delete_rule(project_id: uuid.UUID, rule_id: uuid.UUID, ctx: CtxDep) -> None:
    await alerts.delete_rule(ctx, project_id, rule_id)
