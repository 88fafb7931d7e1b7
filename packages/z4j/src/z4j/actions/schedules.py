"""A project's schedules: list, read, create, edit, enable, disable, run now, delete.

Reading needs ``project.read``; every write needs ``schedule.manage`` (operators and up) and is
audited as ``schedule.<verb>`` with the schedule's id. ``next_run_at`` is computed here on every
change that moves it; the beat scheduler fires a schedule when it comes and claims the slot
through ``z4j.ingest.schedule_claims``. docs/z4j/schedules.md is the manual.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

from platformkit.db.scope import Conn

from z4j.actions import audit
from z4j.actions.access import ProjectAccess, project_scope
from z4j.actions.context import Ctx
from z4j.actions.errors import (
    InvalidInput,
    ScheduleDisabled,
    ScheduleNameTaken,
    ScheduleNotFound,
)
from z4j.domain import schedules as rules
from z4j.domain.retention import of_settings
from z4j.domain.roles import Permission
from z4j.ingest.fold import scoped_id
from z4j.store import agents as agent_store
from z4j.store import schedules as store

MANAGE = Permission.SCHEDULE_MANAGE


async def _found(conn: Conn, project_id: uuid.UUID, schedule_id: uuid.UUID) -> dict[str, Any]:
    row = await store.get(conn, project_id, schedule_id, lock=True)
    if row is None:
        raise ScheduleNotFound(schedule_id=str(schedule_id))
    return row


async def _check_agent(conn: Conn, project_id: uuid.UUID, agent_id: object) -> None:
    if agent_id is None:
        return
    if (
        not isinstance(agent_id, uuid.UUID)
        or await agent_store.get(conn, project_id, agent_id) is None
    ):
        raise InvalidInput("agent_id is not an agent of this project.", field="agent_id")


async def _audit(
    conn: Conn, ctx: Ctx, verb: str, row: dict[str, Any], details: dict[str, Any] | None = None
) -> None:
    await audit.record(
        conn, ctx.brain, f"schedule.{verb}", actor=ctx.actor_id, project_id=row["project_id"],
        target_type="schedule", target_id=row["id"],
        details={"name": row["name"], **(details or {})},
    )  # fmt: skip


def _with_last_task(row: dict[str, Any], states: dict[uuid.UUID, str]) -> dict[str, Any]:
    engine_id = row["metadata"].get("last_task_id")
    task = scoped_id(row["project_id"], engine_id) if isinstance(engine_id, str) else None
    return row | {"last_task": task if task in states else None,
                  "last_task_state": states.get(task) if task else None}  # fmt: skip


async def list_schedules(
    ctx: Ctx, project_id: uuid.UUID
) -> tuple[ProjectAccess, list[dict[str, Any]]]:
    async with project_scope(ctx, project_id) as (conn, access):
        rows = await store.list_for_project(conn, project_id)
        fired = [
            scoped_id(project_id, r["metadata"]["last_task_id"])
            for r in rows
            if isinstance(r["metadata"].get("last_task_id"), str)
        ]
        states = await store.task_states(conn, project_id, fired) if fired else {}
        return access, [_with_last_task(row, states) for row in rows]


async def get_schedule(ctx: Ctx, project_id: uuid.UUID, schedule_id: uuid.UUID) -> dict[str, Any]:
    async with project_scope(ctx, project_id) as (conn, _access):
        row = await store.get(conn, project_id, schedule_id)
        if row is None:
            raise ScheduleNotFound(schedule_id=str(schedule_id))
        engine_id = row["metadata"].get("last_task_id")
        task = scoped_id(project_id, engine_id) if isinstance(engine_id, str) else None
        states = await store.task_states(conn, project_id, [task]) if task else {}
        return _with_last_task(row, states)


async def create_schedule(
    ctx: Ctx, project_id: uuid.UUID, values: dict[str, Any]
) -> dict[str, Any]:
    async with project_scope(ctx, project_id, MANAGE) as (conn, access):
        zone = of_settings(access.project.get("settings")).timezone
        try:
            columns, spec = rules.definition(values, None, zone)
            now = datetime.now(UTC)
            columns["next_run_at"] = (
                rules.first_run(spec, now, None) if columns["enabled"] else None
            )
        except rules.ScheduleInvalid as exc:
            raise InvalidInput.of_field(exc) from None
        await _check_agent(conn, project_id, columns["agent_id"])
        try:
            row = await store.create(conn, project_id, columns | {"scheduler": rules.SCHEDULER})
        except LookupError:
            raise ScheduleNameTaken(name=columns["name"]) from None
        timing = {k: row[k] for k in ("task", "schedule_type", "expression")}
        await _audit(conn, ctx, "create", row, timing)
        return row


async def update_schedule(
    ctx: Ctx, project_id: uuid.UUID, schedule_id: uuid.UUID, changes: dict[str, Any]
) -> dict[str, Any]:
    """Apply the given fields (others stay); the next run moves when the timing changed."""
    async with project_scope(ctx, project_id, MANAGE) as (conn, access):
        before = await _found(conn, project_id, schedule_id)
        zone = of_settings(access.project.get("settings")).timezone
        try:
            columns, spec = rules.definition(changes, before, zone)
            if rules.timing_changed(before, columns):
                redefined = (before["schedule_type"], before["expression"]) != (
                    columns["schedule_type"], columns["expression"])  # fmt: skip
                last = None if redefined else before["last_run_at"]
                now = datetime.now(UTC)
                columns["next_run_at"] = (
                    rules.first_run(spec, now, last) if columns["enabled"] else None
                )
        except rules.ScheduleInvalid as exc:
            raise InvalidInput.of_field(exc) from None
        await _check_agent(conn, project_id, columns["agent_id"])
        row = await store.update(conn, project_id, schedule_id, columns)
        if row is None:
            raise ScheduleNameTaken(name=columns["name"])
        changed = sorted(k for k in columns if k != "next_run_at" and before.get(k) != row.get(k))
        await _audit(conn, ctx, "update", row, {"changed": changed})
        return row


async def set_enabled(
    ctx: Ctx, project_id: uuid.UUID, schedule_id: uuid.UUID, enabled: bool
) -> dict[str, Any]:
    async with project_scope(ctx, project_id, MANAGE) as (conn, access):
        before = await _found(conn, project_id, schedule_id)
        if before["enabled"] == enabled:
            return before
        zone = of_settings(access.project.get("settings")).timezone
        try:
            _columns, spec = rules.definition({}, before, zone)
            after = (
                rules.next_run(spec, datetime.now(UTC), before["last_run_at"]) if enabled else None
            )
        except rules.ScheduleInvalid as exc:
            raise InvalidInput.of_field(exc) from None
        row = await store.update(
            conn, project_id, schedule_id, {"enabled": enabled, "next_run_at": after,
                                            "name": before["name"]},
        )  # fmt: skip
        assert row is not None  # the name is its own
        await _audit(conn, ctx, "enable" if enabled else "disable", row)
        return row


async def run_now(ctx: Ctx, project_id: uuid.UUID, schedule_id: uuid.UUID) -> dict[str, Any]:
    """Bring the next run forward to now: the beat fires it on its next sync."""
    async with project_scope(ctx, project_id, MANAGE) as (conn, _access):
        before = await _found(conn, project_id, schedule_id)
        if not before["enabled"]:
            raise ScheduleDisabled(schedule_id=str(schedule_id))
        row = await store.update(
            conn, project_id, schedule_id,
            {"next_run_at": datetime.now(UTC), "name": before["name"]},
        )  # fmt: skip
        assert row is not None
        await _audit(conn, ctx, "run", row)
        return row


async def delete_schedule(ctx: Ctx, project_id: uuid.UUID, schedule_id: uuid.UUID) -> None:
    async with project_scope(ctx, project_id, MANAGE) as (conn, _access):
        row = await _found(conn, project_id, schedule_id)
        await store.delete(conn, project_id, schedule_id)
        await _audit(conn, ctx, "delete", row)
