"""What a beat scheduler reads and claims: the agent side of schedules.

A beat process authenticates as an agent (its bearer token) and reads the schedules of the
agent's project meant for it (``for_agent``). Before sending a run it claims the slot it saw:
``claim_slot`` locks the row, and only the claim whose slot is still the row's ``next_run_at``
wins; it records the run and moves ``next_run_at`` on in the same transaction, so a second beat
process claiming the same slot finds it gone and sends nothing (docs/decisions/0042).

A claim is bookkeeping of the agent channel like ingest, not a person's action: it is not
audited (the audit log records who created, changed and ran schedules by hand). A starting beat
also reports the app's own ``beat_schedule`` (``report``), which adds the schedules the project
does not have yet.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from platformkit.db.scope import Conn

from z4j.actions import audit
from z4j.brain import Brain
from z4j.domain import schedules as rules
from z4j.domain.retention import DEFAULT_TIMEZONE, of_settings
from z4j.ingest.fold import scoped_id
from z4j.store import projects
from z4j.store import schedules as store

# What a beat may report of an app's beat_schedule entry.
REPORTED = ("name", "task", "schedule_type", "expression", "timezone", "args", "kwargs", "queue")


def _wire(row: dict[str, Any]) -> dict[str, Any]:
    options = {"queue": row["metadata"]["queue"]} if row["metadata"].get("queue") else {}
    return {
        "id": str(row["id"]),
        "name": row["name"],
        "task": row["task"],
        "args": row["args"],
        "kwargs": row["kwargs"],
        "options": options,
        "next_run_at": row["next_run_at"].isoformat() if row["next_run_at"] else None,
    }


@dataclass(frozen=True, slots=True)
class AgentSchedules:
    schedules: list[dict[str, Any]]
    version: str  # changes whenever anything a beat acts on changes: its ETag


async def for_agent(brain: Brain, agent: dict[str, Any]) -> AgentSchedules:
    async with brain.project_tx(agent["project_id"]) as conn:
        rows = await store.for_agent(conn, agent["project_id"], agent["id"])
    wire = [_wire(row) for row in rows]
    digest = hashlib.sha256(json.dumps(wire, sort_keys=True, default=str).encode()).hexdigest()
    return AgentSchedules(wire, digest[:32])


@dataclass(frozen=True, slots=True)
class ClaimResult:
    claimed: bool
    next_run_at: datetime | None
    found: bool = True
    skipped: bool = False  # the slot is spent: the previous run has not finished


async def _previous_state(conn: Conn, row: dict[str, Any]) -> str | None:
    """The brain's state of the task the schedule's last run sent, when it asks to skip runs
    while that one has not finished (None: not asked, no run yet, or not reported yet)."""
    engine_id = row["metadata"].get("last_task_id")
    if row["metadata"].get("skip_if_running") is not True or not isinstance(engine_id, str):
        return None
    task = scoped_id(row["project_id"], engine_id)
    return (await store.task_states(conn, row["project_id"], [task])).get(task)


async def claim_slot(
    brain: Brain, agent: dict[str, Any], schedule_id: uuid.UUID, slot: datetime, task_id: str
) -> ClaimResult:
    project_id = agent["project_id"]
    async with brain.project_tx(project_id) as conn:
        row = await store.get(conn, project_id, schedule_id, lock=True)
        if row is None or row["agent_id"] not in (None, agent["id"]):
            return ClaimResult(False, None, found=False)
        try:
            _columns, spec = rules.definition({}, row, DEFAULT_TIMEZONE)
        except rules.ScheduleInvalid:  # only a hand edit of the row could leave it so
            return ClaimResult(False, row["next_run_at"])
        won = rules.claim(row, spec, slot, datetime.now(UTC), await _previous_state(conn, row))
        if won is None:
            return ClaimResult(False, row["next_run_at"])
        if won.skip:
            await store.record_skip(conn, project_id, schedule_id, won.next_run_at)
            return ClaimResult(False, won.next_run_at, skipped=True)
        await store.record_run(
            conn, project_id, schedule_id, won.last_run_at, won.next_run_at, task_id
        )
        return ClaimResult(True, won.next_run_at)


@dataclass(frozen=True, slots=True)
class Reported:
    created: list[str]
    existing: list[str]
    rejected: list[dict[str, str]]  # {name, field, reason}


async def report(brain: Brain, agent: dict[str, Any], items: list[dict[str, Any]]) -> Reported:
    """The app's own ``beat_schedule`` as a starting beat found it: each entry whose name the
    project does not have yet becomes a schedule (enabled, for any beat of the project), so the
    brain's beat runs it from then on; an existing name is left as the brain has it. Each
    creation is audited as ``schedule.create`` with no actor and the reporting agent."""
    project_id = agent["project_id"]
    created, existing, rejected = [], [], []
    async with brain.project_tx(project_id) as conn:
        zone = of_settings(await projects.settings_of(conn, project_id)).timezone
        now = datetime.now(UTC)
        for item in items:
            name = str(item.get("name", ""))[: rules.MAX_NAME]
            try:
                columns, spec = rules.definition(
                    {k: item[k] for k in REPORTED if k in item}, None, zone
                )
                columns["next_run_at"] = rules.next_run(spec, now, None)
            except rules.ScheduleInvalid as exc:
                rejected.append({"name": name, "field": exc.field, "reason": exc.reason})
                continue
            columns["metadata"]["source"] = "beat_schedule"
            try:
                row = await store.create(conn, project_id, columns | {"scheduler": rules.SCHEDULER})
            except LookupError:
                existing.append(columns["name"])
                continue
            created.append(row["name"])
            await audit.record(
                conn, brain, "schedule.create", actor=None, project_id=project_id,
                target_type="schedule", target_id=row["id"],
                details={"name": row["name"], "source": "beat_schedule",
                         "agent_id": str(agent["id"])},
            )  # fmt: skip
    return Reported(created, existing, rejected)
