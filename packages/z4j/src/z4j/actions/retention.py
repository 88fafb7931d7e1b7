"""A project's retention settings and what the retention controller last did.

Reading needs ``project.read``; changing needs ``retention.manage`` (admins and owners) and is
audited as ``project.retention`` with the values before and after. The controller that
applies them is ``z4j.controllers.retention``; docs/z4j/retention.md is the manual.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from z4j.actions import audit
from z4j.actions.access import project_scope
from z4j.actions.context import Ctx
from z4j.actions.errors import InvalidInput
from z4j.domain.retention import Retention, RetentionInvalid, of_settings, parse_change
from z4j.domain.roles import Permission
from z4j.ingest import project_keys
from z4j.store import projects
from z4j.store import retention as store


@dataclass(frozen=True, slots=True)
class RetentionView:
    retention: Retention
    last_run: dict[str, Any] | None  # last_run_at, tasks_deleted, events_deleted, backlog, ...


async def read(ctx: Ctx, project_id: uuid.UUID) -> RetentionView:
    async with project_scope(ctx, project_id) as (conn, access):
        return RetentionView(
            of_settings(access.project.get("settings")), await store.last_run(conn, project_id)
        )


async def change(ctx: Ctx, project_id: uuid.UUID, values: Mapping[str, object]) -> Retention:
    """Apply the given keys (others stay); a value out of bounds is a 422 naming its field."""
    async with project_scope(ctx, project_id, Permission.RETENTION_MANAGE) as (conn, access):
        before = of_settings(access.project.get("settings"))
        try:
            after = parse_change(before, values)
        except RetentionInvalid as exc:
            raise InvalidInput.of_field(exc) from None
        if after != before:
            for key, value in after.as_settings().items():
                await projects.set_setting(conn, project_id, key, value)
            project_keys.forget(project_id)
            await audit.record(
                conn, ctx.brain, "project.retention", actor=ctx.actor_id, project_id=project_id,
                target_type="project", target_id=project_id,
                details={"before": before.as_settings(), "after": after.as_settings()},
            )  # fmt: skip
        return after
