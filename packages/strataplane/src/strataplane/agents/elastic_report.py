"""What one Elastic Agent check-in reports, and how it folds into the agent's row
(docs/strataplane/agents/elastic-agent.md §4): health from the status and the units, applied
proven by an acknowledged ``policy_revision_idx``, sync, and one transition per change.

A check-in round (agents/elastic.py) folds its report at once; a quiet check-in's report is
folded by the batcher (agents/elastic_batch.py) against the row as it is when the batch is
written. Both use ``fold_checkin``, so the rows end the same either way.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

from strataplane.store.fleet_elastic import Action, Component
from strataplane.store.fleet_reports import ReportRow, ReportUpdate

__all__ = ["CheckinReport", "checkin_health", "fold_checkin"]

type Transition = tuple[UUID, str, str | None, str]


@dataclass(frozen=True)
class CheckinReport:
    agent_id: UUID
    at: datetime
    status: str
    message: str | None
    revision_idx: int | None
    components: list[Component]
    version: str | None
    version_raw: str | None
    facts: dict[str, Any]


def checkin_health(status: str, components: list[Component]) -> tuple[str, str | None]:
    """(health, message): the agent's own status first, then its worst unit."""
    if status == "error":
        return "failed", "the agent reports status error"
    bad = [c for c in components if c.state in ("FAILED", "DEGRADED")]
    if status == "degraded" or bad:
        named = ", ".join(f"{c.component_id}/{c.unit_id or '-'} {c.state}" for c in bad[:5])
        return "degraded", named or "the agent reports status degraded"
    return "healthy", None


def fold_checkin(
    row: ReportRow, latest: Action | None, proven: Action | None, report: CheckinReport
) -> tuple[ReportUpdate, list[Transition], UUID | None]:
    """The agent's new columns, its transitions, and the POLICY_CHANGE whose apply the
    check-in reports as failed (its ``ack_error`` becomes the check-in's message), if any.

    ``latest`` is the agent's newest POLICY_CHANGE, ``proven`` the one whose ``policy_seq`` is
    the check-in's ``policy_revision_idx``."""
    desired = row.desired_artifact
    applied, applied_rev = row.applied_artifact, row.applied_revision_id
    if proven is not None and proven.acked_at is not None and proven.artifact != applied:
        applied = proven.artifact
        applied_rev = row.desired_revision_id if applied == desired else None
    elif applied is not None and applied == desired:
        applied_rev = row.desired_revision_id
    health, health_message = checkin_health(report.status, report.components)
    sync, reason = row.sync, row.sync_reason
    failed = None
    if sync != "render_error" and applied is not None and applied == desired:
        sync, reason = "in_sync", None
    elif (
        sync != "render_error"
        and report.status in ("error", "degraded")
        and report.message
        and latest is not None
        and latest.delivered_at is not None
        and latest.artifact == desired
    ):
        sync, reason = "out_of_sync", "reload_failed"
        failed = latest.id
    elif sync == "in_sync":
        sync, reason = "updating", None
    update = ReportUpdate(
        row.id,
        report.at,
        health,
        health_message,
        sync,
        reason,
        report.version,
        report.version_raw,
        applied,
        applied_rev,
        applied != row.applied_artifact,
        report.facts,
    )
    version = report.version if report.version is not None else row.version
    events: list[Transition] = [
        (row.id, name, before, after)
        for name, before, after in (
            ("health", row.health, health),
            ("sync", row.sync, sync),
            ("version", row.version, version),
        )
        if before != after and after is not None
    ]
    old = row.applied_artifact
    if applied is not None and applied != old:
        events.append((row.id, "applied", old.hex() if old else None, applied.hex()))
    return update, events, failed
