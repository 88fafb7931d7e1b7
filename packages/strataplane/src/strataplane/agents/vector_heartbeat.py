"""The heartbeat of the rendered Vector pipeline (docs/strataplane/agents/vector.md §4): the
``http`` sink's newline-delimited JSON events, a few ``internal_metrics`` and the WARN and
ERROR ``internal_logs``, turned into the same ``Heartbeat`` that Telegraf's reports become.

What Vector says about its reloads is read from its own log events: ``Config reload rejected
due to non-reloadable global options.`` (and ``Reload was not successful.`` with ``reason``
``global_options_changed``) means the old configuration keeps running until a restart;
``reason`` ``topology_build_failed`` or ``Configuration error.`` means the new one failed to
build and Vector rolled back.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any
from uuid import UUID

from platformkit import boundedjson
from platformkit.storable import scrub

from strataplane.agents.heartbeat import BadHeartbeat, Heartbeat, LogRow
from strataplane.domain.fleet_status import Report, vector_version
from strataplane.domain.hostnames import is_host_name

__all__ = ["MAX_EVENTS", "parse_vector_heartbeat"]

MAX_EVENTS = 1000
DEPTH = 32
_GLOBAL_REJECTED = "Config reload rejected due to non-reloadable global options."
_BUILD_REASONS = frozenset({"topology_build_failed", "restore_failed"})
_LEVELS = frozenset({"ERROR", "WARN"})
_DETAIL = frozenset({"reason", "error", "changed_fields"})


def _events(raw: bytes) -> list[dict[str, Any]]:
    lines = [line for line in raw.split(b"\n") if line.strip()]
    if len(lines) > MAX_EVENTS:
        raise BadHeartbeat(f"at most {MAX_EVENTS} events a request", "body")
    events = []
    for n, line in enumerate(lines):
        try:
            event = boundedjson.loads(line, max_depth=DEPTH)
        except boundedjson.JsonRefused as exc:
            raise BadHeartbeat(f"line {n + 1}: {exc.reason}", "body") from None
        if not isinstance(event, dict):
            raise BadHeartbeat(f"line {n + 1}: an event is a JSON object", "body")
        events.append(event)
    return events


def _reload_error(event: dict[str, Any]) -> str | None:
    message, reason = event.get("message"), event.get("reason")
    if message == _GLOBAL_REJECTED or reason in ("global_options_changed", "global_diff_failed"):
        return "restart_required"
    if reason in _BUILD_REASONS or message == "Configuration error.":
        return "reload_failed"
    return None


def _log(agent_id: UUID, event: dict[str, Any], level: str, now: datetime) -> LogRow:
    meta = event.get("metadata") if isinstance(event.get("metadata"), dict) else {}
    assert isinstance(meta, dict)
    component = (
        event.get("vector", {}).get("component_id")
        if isinstance(event.get("vector"), dict)
        else None
    )
    source = str(component or meta.get("module_path") or "vector")[:200]
    try:
        ts = datetime.fromisoformat(str(event.get("timestamp")))
    except ValueError:
        ts = now
    detail = {
        k: str(v)[:500] for k, v in event.items() if k in ("reason", "error", "changed_fields")
    }
    return (
        agent_id,
        ts if ts.tzinfo else ts.replace(tzinfo=UTC),
        level,
        source,
        str(component)[:200] if component else None,
        str(event.get("message", ""))[:4000],
        detail or None,
    )


def parse_vector_heartbeat(
    agent_id: UUID,
    external_id: str,
    raw: bytes,
    config_hash: str | None,
    instance: str | None,
) -> Heartbeat:
    """A heartbeat from the sink's body and headers; ``BadHeartbeat`` names what is wrong."""
    if instance != external_id:
        raise BadHeartbeat(
            "X-Strataplane-Instance-Id is not the instance id this credential was enrolled with",
            "X-Strataplane-Instance-Id",
        )
    events, scrubbed = scrub(_events(raw))
    now = datetime.now(UTC)
    version: str | None = None
    raw_version: str | None = None
    hostname: str | None = None
    errors = warnings = 0
    logs: list[LogRow] = []
    reload_error: str | None = None
    for event in events:
        tags = event.get("tags") if isinstance(event.get("tags"), dict) else None
        if isinstance(event.get("name"), str) and tags is not None:
            if event["name"] == "build_info" and isinstance(tags.get("version"), str):
                version, raw_version = vector_version(tags["version"])
            host = tags.get("host")
        else:
            meta = event.get("metadata") if isinstance(event.get("metadata"), dict) else {}
            assert isinstance(meta, dict)
            level = str(meta.get("level", "")).upper()
            if level in _LEVELS:
                errors += level == "ERROR"
                warnings += level == "WARN"
                logs.append(_log(agent_id, event, level, now))
                reload_error = _reload_error(event) or reload_error
            host = event.get("host")
        if isinstance(host, str) and is_host_name(host):
            hostname = host
    try:
        reported = bytes.fromhex(config_hash) if config_hash else None
    except ValueError:
        reported = None
    facts: dict[str, Any] = {
        "statistics": {"errors": errors, "warnings": warnings, "events": len(events)},
        "repaired": ["text"] if scrubbed else None,
    }
    if hostname is not None:
        facts["hostname"] = hostname
    return Heartbeat(
        agent_id,
        now,
        reported if reported and len(reported) == 32 else None,
        version,
        raw_version,
        Report(None, errors, warnings),
        facts,
        logs[-200:],
        reload_error,
    )
