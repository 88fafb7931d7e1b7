"""Alert rules: what a rule may say, when it fires and resolves, and what its notices say.

Pure: no I/O. A rule compares one value with its threshold, and fires while the value is over
it (strictly greater):

- ``failure_rate``: percent of the tasks finished in the window that failed (0-100), once at
  least ``min_tasks`` finished;
- ``runtime_p95``: the 95th percentile runtime, in seconds, of the tasks finished in the
  window, once at least ``min_tasks`` of them reported a runtime;
- ``queue_depth``: how many tasks wait (``pending``), now;
- ``backlog_age``: the age in seconds of the oldest waiting task, now;
- ``agent_offline``: how many agents have been offline for longer than the window;
- ``worker_offline``: how many worker connections of the project's agents, heard from in the
  last day, have been silent or disconnected for longer than the window.

``task_name`` and ``queue`` narrow the task kinds; ``agent_name`` narrows the agent and
worker kinds.
A value the evaluation cannot give (too few tasks, nothing waiting) is not over the threshold:
an open firing resolves. Each firing is announced once and its end once, to every channel
(webhook, email) of the rule; a channel that fails is tried again on the next evaluations, at
most ``MAX_ATTEMPTS`` failed rounds (counted again from its resolution).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any
from urllib.parse import urlsplit

from z4j.domain.fields import FieldInvalid

MAX_ATTEMPTS = 8
MAX_EMAILS = 10
MIN_WINDOW, MAX_WINDOW, DEFAULT_WINDOW = 60, 7 * 86_400, 300
MAX_MIN_TASKS = 1_000_000
_EMAIL = re.compile(r"[^@\s]{1,64}@[^@\s]{1,255}")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


class Kind(StrEnum):
    FAILURE_RATE = "failure_rate"
    RUNTIME_P95 = "runtime_p95"
    QUEUE_DEPTH = "queue_depth"
    BACKLOG_AGE = "backlog_age"
    AGENT_OFFLINE = "agent_offline"
    WORKER_OFFLINE = "worker_offline"


UNIT = {Kind.FAILURE_RATE: "%", Kind.RUNTIME_P95: "s", Kind.QUEUE_DEPTH: "tasks",
        Kind.BACKLOG_AGE: "s", Kind.AGENT_OFFLINE: "agents",
        Kind.WORKER_OFFLINE: "workers"}  # fmt: skip
TASK_KINDS = frozenset({Kind.FAILURE_RATE, Kind.RUNTIME_P95, Kind.QUEUE_DEPTH, Kind.BACKLOG_AGE})
WINDOWED = frozenset({Kind.FAILURE_RATE, Kind.RUNTIME_P95, Kind.AGENT_OFFLINE,
                      Kind.WORKER_OFFLINE})  # fmt: skip


class RuleInvalid(FieldInvalid):
    """An alert rule's field refused."""


@dataclass(frozen=True, slots=True)
class RuleSpec:
    name: str
    kind: Kind
    threshold: float
    window_seconds: int = DEFAULT_WINDOW
    min_tasks: int = 1
    task_name: str | None = None
    queue: str | None = None
    agent_name: str | None = None
    webhook_url: str | None = None
    emails: tuple[str, ...] = ()
    enabled: bool = True

    def as_row(self) -> dict[str, Any]:
        return {"name": self.name, "kind": self.kind.value, "threshold": self.threshold,
                "window_seconds": self.window_seconds, "min_tasks": self.min_tasks,
                "task_name": self.task_name, "queue": self.queue, "agent_name": self.agent_name,
                "webhook_url": self.webhook_url, "emails": list(self.emails),
                "enabled": self.enabled}  # fmt: skip

    @classmethod
    def of_row(cls, row: Mapping[str, Any]) -> RuleSpec:
        return cls(
            row["name"], Kind(row["kind"]), float(row["threshold"]), int(row["window_seconds"]),
            int(row["min_tasks"]), row["task_name"], row["queue"], row["agent_name"],
            row["webhook_url"], tuple(row["emails"] or ()), bool(row["enabled"]),
        )  # fmt: skip


def _text(value: object, field: str, limit: int, *, required: bool = False) -> str | None:
    if value is None or (isinstance(value, str) and not value.strip() and not required):
        if required:
            raise RuleInvalid(field, "is required")
        return None
    if not isinstance(value, str) or not value.strip() or len(value.strip()) > limit:
        raise RuleInvalid(field, f"must be text of 1 to {limit} characters")
    if _CONTROL.search(value):
        raise RuleInvalid(field, "must not hold control characters")
    return value.strip()


def _number(value: object, field: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise RuleInvalid(field, "must be a number")
    if not math.isfinite(value) or value < 0:
        raise RuleInvalid(field, "must be a finite number of at least 0")
    return float(value)


def _whole(value: object, field: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise RuleInvalid(field, f"must be a whole number from {low} to {high}")
    return value


def webhook_url(value: object) -> str | None:
    """An http(s) URL with a host and no credentials, or None."""
    url = _text(value, "webhook_url", 2000)
    if url is None:
        return None
    try:
        parts = urlsplit(url)
        host = parts.hostname
    except ValueError:  # a bracketed host that is not an IPv6 address, and the like
        raise RuleInvalid("webhook_url", "must be an http or https URL with a host") from None
    if parts.scheme not in ("http", "https") or not host:
        raise RuleInvalid("webhook_url", "must be an http or https URL with a host")
    if parts.username is not None or parts.password is not None:
        raise RuleInvalid("webhook_url", "must not carry a user name or password")
    return url


def webhook_masked(url: str | None) -> str | None:
    """``https://host/…``: a webhook's address without the path, which often holds a token."""
    if url is None:
        return None
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}/…"


def _emails(value: object) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list | tuple) or len(value) > MAX_EMAILS:
        raise RuleInvalid("emails", f"must be a list of at most {MAX_EMAILS} addresses")
    out = []
    for item in value:
        if not isinstance(item, str) or len(item) > 320 or not _EMAIL.fullmatch(item.strip()):
            raise RuleInvalid("emails", "holds something that is not an email address")
        out.append(item.strip().lower())
    return tuple(dict.fromkeys(out))


FIELDS = ("name", "kind", "threshold", "window_seconds", "min_tasks", "task_name", "queue",
          "agent_name", "webhook_url", "emails", "enabled")  # fmt: skip


def parse_rule(values: Mapping[str, object], current: RuleSpec | None = None) -> RuleSpec:
    """A rule from ``values`` (a change of ``current`` when given: absent keys stay); raises
    ``RuleInvalid`` naming the first bad field."""
    for key in values:
        if key not in FIELDS:
            raise RuleInvalid(key, "is not a field of an alert rule")
    base = current.as_row() if current else {}
    merged = {**base, **values}
    name = _text(merged.get("name"), "name", 200, required=True)
    assert name is not None
    try:
        kind = Kind(str(merged.get("kind")))
    except ValueError:
        raise RuleInvalid("kind", f"is one of {', '.join(Kind)}") from None
    if merged.get("threshold") is None:
        raise RuleInvalid("threshold", "is required")
    threshold = _number(merged.get("threshold"), "threshold")
    if kind is Kind.FAILURE_RATE and threshold > 100:
        raise RuleInvalid("threshold", "is a percentage, at most 100")
    window = _whole(merged.get("window_seconds", DEFAULT_WINDOW), "window_seconds", MIN_WINDOW,
                    MAX_WINDOW)  # fmt: skip
    min_tasks = _whole(merged.get("min_tasks", 1), "min_tasks", 1, MAX_MIN_TASKS)
    task_name = _text(merged.get("task_name"), "task_name", 500)
    queue = _text(merged.get("queue"), "queue", 200)
    agent_name = _text(merged.get("agent_name"), "agent_name", 200)
    if kind in TASK_KINDS and agent_name is not None:
        raise RuleInvalid("agent_name", "narrows agent_offline and worker_offline rules only")
    if kind not in TASK_KINDS and (task_name is not None or queue is not None):
        raise RuleInvalid("task_name" if task_name else "queue", "narrows task rules only")
    enabled = merged.get("enabled", True)
    if not isinstance(enabled, bool):
        raise RuleInvalid("enabled", "must be true or false")
    return RuleSpec(name, kind, threshold, window, min_tasks, task_name, queue, agent_name,
                    webhook_url(merged.get("webhook_url")), _emails(merged.get("emails")),
                    enabled)  # fmt: skip


class Step(StrEnum):
    FIRE = "fire"
    RESOLVE = "resolve"


def decide(is_open: bool, value: float | None, threshold: float) -> Step | None:
    """What an evaluation does: open a firing, resolve the open one, or nothing."""
    over = value is not None and value > threshold
    if over and not is_open:
        return Step.FIRE
    if is_open and not over:
        return Step.RESOLVE
    return None


class Phase(StrEnum):
    FIRING = "firing"
    RESOLVED = "resolved"


def channels(rule: RuleSpec) -> list[str]:
    """Where a rule's notices go: ``webhook`` and ``email:<address>`` for each address, each
    delivered (and retried) on its own."""
    return (["webhook"] if rule.webhook_url else []) + [f"email:{a}" for a in rule.emails]


def _done(notices: Mapping[str, Any], phase: Phase) -> Mapping[str, Any]:
    done = notices.get(phase.value)
    return done if isinstance(done, dict) else {}


def owed(
    resolved: bool, notices: Mapping[str, Any], rule: RuleSpec, attempts: int
) -> dict[str, list[Phase]]:
    """Per channel, the notices it is still owed in order: the start, then (once resolved)
    the end; nothing once ``MAX_ATTEMPTS`` rounds failed (a resolution starts the count
    again). A channel's end waits for its own start only, never for another channel."""
    if attempts >= MAX_ATTEMPTS:
        return {}
    out = {}
    for channel in channels(rule):
        phases = [Phase.FIRING] if channel not in _done(notices, Phase.FIRING) else []
        if resolved and channel not in _done(notices, Phase.RESOLVED):
            phases.append(Phase.RESOLVED)
        if phases:
            out[channel] = phases
    return out


def show(kind: Kind, value: float | None) -> str:
    if value is None:
        return "no value"
    if kind is Kind.FAILURE_RATE:
        return f"{value:.1f} %"
    if kind in (Kind.RUNTIME_P95, Kind.BACKLOG_AGE):
        return f"{value:.2f} s"
    return f"{value:.0f} {UNIT[kind]}"


def scope_text(rule: RuleSpec) -> str:
    parts = [f"{label} {v}" for label, v in (("task", rule.task_name), ("queue", rule.queue),
             ("agent", rule.agent_name)) if v]  # fmt: skip
    return ", ".join(parts) or ("all tasks" if rule.kind in TASK_KINDS else "all agents")


@dataclass(frozen=True, slots=True)
class Notice:
    phase: Phase
    rule_id: str
    firing_id: str
    project_id: str
    project_name: str
    rule: RuleSpec
    value: float | None
    started_at: datetime
    resolved_at: datetime | None
    link: str
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def subject(self) -> str:
        word = "FIRING" if self.phase is Phase.FIRING else "RESOLVED"
        return f"[z4j {word}] {self.project_name}: {self.rule.name}"

    @property
    def text(self) -> str:
        r = self.rule
        lines = [
            f"Alert rule {r.name!r} in project {self.project_name} is {self.phase.value}.",
            f"What: {r.kind.value} over {show(r.kind, r.threshold)} ({scope_text(r)}"
            + (f", window {r.window_seconds} s)" if r.kind in WINDOWED else ")"),
            f"Value: {show(r.kind, self.value)}",
            f"Since: {self.started_at.isoformat()}",
        ]
        if self.resolved_at is not None:
            lines.append(f"Resolved: {self.resolved_at.isoformat()}")
        lines.append(f"Open: {self.link}")
        return "\n".join(lines) + "\n"

    def payload(self) -> dict[str, Any]:
        r = self.rule
        return {
            "status": self.phase.value,
            "firing_id": self.firing_id,
            "project": {"id": self.project_id, "name": self.project_name},
            "rule": {
                "id": self.rule_id,
                "name": r.name,
                "kind": r.kind.value,
                "threshold": r.threshold,
                "unit": UNIT[r.kind],
                "window_seconds": r.window_seconds,
                "task_name": r.task_name,
                "queue": r.queue,
                "agent_name": r.agent_name,
            },
            "value": self.value,
            "started_at": self.started_at.isoformat(),
            "resolved_at": None if self.resolved_at is None else self.resolved_at.isoformat(),
            "url": self.link,
            "summary": self.subject,
        }
