"""A project's retention settings: defaults, bounds, and what a change may set.

They live in ``projects.settings`` beside the project's other keys:

- ``task_retention_days`` (default 30, 1-3650): a task is deleted, with its events, this many
  days after the brain first stored it (``tasks.created_at``);
- ``event_retention_days`` (default 14, 1-3650, at most ``task_retention_days``): an event is
  deleted this many days after the brain received it (``events.created_at``);
- ``timezone`` (default ``UTC``): an IANA zone name, the project's zone for people reading it;
- ``redact_keys`` (default none, at most 50 names of 1-100 letters, digits, ``_ . -``): key
  names whose values the brain masks on receipt in this project's events, beside the built-in
  sensitive keys (``z4j_agent.textsecrets``).

Pure: no I/O. ``parse_change`` refuses a value out of bounds naming the field.
"""

from __future__ import annotations

import re
import zoneinfo
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from z4j.domain.fields import FieldInvalid

DEFAULT_TASK_DAYS = 30
DEFAULT_EVENT_DAYS = 14
DEFAULT_TIMEZONE = "UTC"
MIN_DAYS, MAX_DAYS = 1, 3650
MAX_REDACT_KEYS, MAX_REDACT_KEY_LENGTH = 50, 100
KEYS = ("task_retention_days", "event_retention_days", "timezone", "redact_keys")
_KEY_NAME = re.compile(rf"[A-Za-z0-9_.\-]{{1,{MAX_REDACT_KEY_LENGTH}}}")


class RetentionInvalid(FieldInvalid):
    """A retention setting refused."""


@dataclass(frozen=True, slots=True)
class Retention:
    task_days: int = DEFAULT_TASK_DAYS
    event_days: int = DEFAULT_EVENT_DAYS
    timezone: str = DEFAULT_TIMEZONE
    redact_keys: tuple[str, ...] = ()

    def as_settings(self) -> dict[str, Any]:
        return {"task_retention_days": self.task_days, "event_retention_days": self.event_days,
                "timezone": self.timezone, "redact_keys": list(self.redact_keys)}  # fmt: skip


def _days(value: object, field: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise RetentionInvalid(field, "must be a whole number of days")
    if not MIN_DAYS <= value <= MAX_DAYS:
        raise RetentionInvalid(field, f"must be between {MIN_DAYS} and {MAX_DAYS} days")
    return value


def _zone(value: object) -> str:
    if not isinstance(value, str) or not 0 < len(value) <= 64:
        raise RetentionInvalid("timezone", "must be an IANA time zone name")
    if value not in _zones():
        raise RetentionInvalid("timezone", "is not a known IANA time zone name")
    return value


def _redact_keys(value: object) -> tuple[str, ...]:
    if not isinstance(value, list | tuple) or len(value) > MAX_REDACT_KEYS:
        raise RetentionInvalid("redact_keys", f"must be a list of at most {MAX_REDACT_KEYS} names")
    for key in value:
        if not isinstance(key, str) or _KEY_NAME.fullmatch(key) is None:
            raise RetentionInvalid(
                "redact_keys",
                f"holds names of 1 to {MAX_REDACT_KEY_LENGTH} letters, digits, '_', '.' or '-'",
            )
    return tuple(dict.fromkeys(value))


def _zones() -> set[str]:
    global _ZONES
    if _ZONES is None:
        _ZONES = zoneinfo.available_timezones() | {"UTC"}
    return _ZONES


_ZONES: set[str] | None = None


def parse_change(current: Retention, change: Mapping[str, object]) -> Retention:
    """``current`` with the keys of ``change`` applied (a key absent stays); raises
    ``RetentionInvalid`` naming the first bad field, or an unknown key."""
    for key in change:
        if key not in KEYS:
            raise RetentionInvalid(key, "is not a retention setting")
    task = _days(change.get("task_retention_days", current.task_days), "task_retention_days")
    event = _days(change.get("event_retention_days", current.event_days), "event_retention_days")
    if event > task:
        raise RetentionInvalid("event_retention_days", "must not be more than task_retention_days")
    zone = _zone(change.get("timezone", current.timezone))
    keys = _redact_keys(change.get("redact_keys", current.redact_keys))
    return Retention(task, event, zone, keys)


def of_settings(settings: Mapping[str, Any] | None) -> Retention:
    """The retention a project's stored settings give (defaults where a key is absent; a
    stored value out of bounds, which only a hand edit could leave, falls back too)."""
    settings = settings or {}
    try:
        return parse_change(Retention(), {k: settings[k] for k in KEYS if k in settings})
    except RetentionInvalid:
        return Retention()
