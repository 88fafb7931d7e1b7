"""Telegraf ``outputs.heartbeat`` schema v1 (plugins/outputs/heartbeat/schema_v1.json): parse a
body, and fold it into an agent's state.

Folding: the hash header names the applied artifact when it is an artifact of the tenant (any
other value is ignored); ``applied_revision_id`` is the desired revision when the desired
artifact is applied, kept while the same artifact stays applied, NULL otherwise. Health comes
from ``status`` and ``statistics``; sync becomes ``in_sync`` when the applied artifact is the
desired one, and time-based transitions are the controllers' (controllers/not_reporting.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

from platformkit.storable import BIGINT_MAX, scrub

from strataplane.domain.fleet_status import Report, health_of, telegraf_version
from strataplane.domain.hostnames import is_host_name
from strataplane.store.fleet_reports import ReportRow, ReportUpdate

_LEVELS = frozenset({"ERROR", "WARN", "INFO", "DEBUG", "TRACE"})
_STATUSES = frozenset({"OK", "WARN", "FAIL", "UNDEFINED"})

type LogRow = tuple[UUID, datetime, str, str, str | None, str, dict[str, Any] | None]


class BadHeartbeat(ValueError):
    """A body that is not a schema v1 heartbeat of this agent; ``field`` names the culprit."""

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


@dataclass
class Heartbeat:
    agent_id: UUID
    received_at: datetime
    reported_hash: bytes | None
    version: str | None
    version_raw: str | None
    report: Report
    facts: dict[str, Any]
    logs: list[LogRow] = field(default_factory=list)
    # the agent reported that it refused to load its configuration: the out_of_sync reason
    # (Vector: restart_required, reload_failed); Telegraf exits instead
    reload_error: str | None = None


def _int(value: object) -> int:
    """A count as reported; 0 for anything that is not one. Clamped to bigint by ``_counts``."""
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _counts(stats: dict[str, Any]) -> tuple[dict[str, int], bool]:
    """The statistics within 0..bigint, and whether any had to be clamped."""
    raw = {k: _int(stats.get(k)) for k in ("errors", "warnings", "metrics")}
    counts = {k: min(max(v, 0), BIGINT_MAX) for k, v in raw.items()}
    return counts, counts != raw


def _log(agent_id: UUID, entry: object, now: datetime) -> LogRow | None:
    if not isinstance(entry, dict) or not isinstance(entry.get("message"), str):
        return None
    level = str(entry.get("level", "INFO")).upper()
    source = str(entry.get("source", ""))[:200]
    _plugin, sep, key = source.partition("::")
    try:
        ts = datetime.fromisoformat(str(entry.get("time")))
    except ValueError:
        ts = now
    attrs = entry.get("attributes")
    return (
        agent_id,
        ts if ts.tzinfo else ts.replace(tzinfo=UTC),
        level if level in _LEVELS else "INFO",
        source,
        key if sep else None,
        entry["message"][:4000],
        attrs if isinstance(attrs, dict) else None,
    )


def _check(body: object, external_id: str) -> dict[str, Any]:
    """The vocabulary an agent reports is checked, never repaired: a heartbeat of another
    agent, an unknown status or a host name outside RFC 1123 is refused naming the field."""
    if not isinstance(body, dict) or not isinstance(body.get("id"), str):
        raise BadHeartbeat("a heartbeat is an object with id and version", "id")
    if not isinstance(body.get("version"), str):
        raise BadHeartbeat("schema v1 heartbeats only, with a version", "version")
    if body.get("schema", 1) != 1:
        raise BadHeartbeat("schema v1 heartbeats only, with a version", "schema")
    if body["id"] != external_id:
        raise BadHeartbeat("id is not the instance_id this credential was enrolled with", "id")
    status = body.get("status")
    if status is not None and not (isinstance(status, str) and status in _STATUSES):
        raise BadHeartbeat(f"status is one of {', '.join(sorted(_STATUSES))}", "status")
    hostname = body.get("hostname")
    if hostname is not None and not (isinstance(hostname, str) and is_host_name(hostname)):
        raise BadHeartbeat("hostname is not an RFC 1123 host name", "hostname")
    return body


def parse_heartbeat(
    agent_id: UUID, external_id: str, parsed: object, config_hash: str | None
) -> Heartbeat:
    # Free text (version, configurations, logs) is kept with what PostgreSQL cannot store
    # replaced by U+FFFD, and the report marked: refusing it would make Telegraf resend the
    # same lines, and its statistics pile up, forever.
    body, scrubbed = scrub(_check(parsed, external_id))
    now = datetime.now(UTC)
    stats = body.get("statistics") if isinstance(body.get("statistics"), dict) else {}
    assert isinstance(stats, dict)
    counts, clamped = _counts(stats)
    status = body.get("status")
    version, raw = telegraf_version(body["version"])
    try:
        reported = bytes.fromhex(config_hash) if config_hash else None
    except ValueError:
        reported = None
    facts: dict[str, Any] = {"statistics": counts}
    repaired = [what for what, done in (("statistics", clamped), ("text", scrubbed)) if done]
    facts["repaired"] = repaired or None
    if isinstance(body.get("hostname"), str):
        facts["hostname"] = body["hostname"]
    if isinstance(body.get("configurations"), list):
        facts["configurations"] = [str(c)[:500] for c in body["configurations"][:20]]
    if status is not None:
        facts["status"] = status
    logs = body.get("logs") if isinstance(body.get("logs"), list) else []
    assert isinstance(logs, list)
    rows = [r for r in (_log(agent_id, e, now) for e in logs[:200]) if r is not None]
    report = Report(status, counts["errors"], counts["warnings"])
    return Heartbeat(
        agent_id,
        now,
        reported if reported and len(reported) == 32 else None,
        version,
        raw,
        report,
        facts,
        rows,
    )


def fold(row: ReportRow, hb: Heartbeat, known: set[bytes]) -> tuple[ReportUpdate, list[Any]]:
    """The agent's new report columns and the transitions (agent, field, from, to)."""
    applied, applied_rev = row.applied_artifact, row.applied_revision_id
    reported = hb.reported_hash
    if (
        reported is not None
        and reported != applied
        and (reported in (row.desired_artifact, row.served_artifact) or reported in known)
    ):
        applied = reported
        applied_rev = row.desired_revision_id if reported == row.desired_artifact else None
    elif applied is not None and applied == row.desired_artifact:
        applied_rev = row.desired_revision_id  # a later revision rendering the same bytes
    health, message = health_of(hb.report)
    sync, reason = row.sync, row.sync_reason
    if sync != "render_error" and applied is not None and applied == row.desired_artifact:
        sync, reason = "in_sync", None
    elif sync == "in_sync":
        sync, reason = "updating", None
    if (
        hb.reload_error is not None
        and sync != "render_error"
        and applied != row.desired_artifact
        and row.served_artifact == row.desired_artifact
    ):
        sync, reason = "out_of_sync", hb.reload_error
    update = ReportUpdate(
        row.id,
        hb.received_at,
        health,
        message,
        sync,
        reason,
        hb.version,
        hb.version_raw,
        applied,
        applied_rev,
        applied != row.applied_artifact,
        hb.facts,
    )
    events: list[Any] = []
    for name, old, new in (("health", row.health, health), ("sync", row.sync, sync)):
        if old != new:
            events.append((row.id, name, old, new))
    if applied != row.applied_artifact and applied is not None:
        old_hex = row.applied_artifact.hex() if row.applied_artifact else None
        events.append((row.id, "applied", old_hex, applied.hex()))
    if hb.version is not None and hb.version != row.version:
        events.append((row.id, "version", row.version, hb.version))
    return update, events
