"""Schedules: their three kinds, what a definition may hold, and when each runs next.

- ``cron``: a five-field cron expression (``z4j.domain.cron``) on the schedule's time zone;
- ``interval``: a period such as ``30s``, ``5m``, ``1h30m``, ``1d`` or a number of seconds
  (1 second to 366 days); the next run is that long after the last one fired;
- ``date``: one run at an ISO 8601 time (``2027-01-31T09:00``; without an offset it is read on
  the schedule's time zone); afterwards it has no next run.

A beat scheduler fires a schedule when its ``next_run_at`` has come, after claiming that very
slot: ``claim`` is the rule of the compare-and-set that lets one beat process win a slot and
every other one lose it (docs/decisions/0042). A slot missed while no beat ran fires once, late,
and the next one is computed from the time it fired: missed runs are not replayed.

Pure: no I/O.
"""

from __future__ import annotations

import json
import re
import zoneinfo
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Any
from zoneinfo import ZoneInfo

from platformkit.storable import find_unstorable

from z4j.domain import cron
from z4j.domain.fields import FieldInvalid
from z4j.domain.retention import DEFAULT_TIMEZONE

MAX_NAME, MAX_TASK, MAX_EXPRESSION = 200, 500, 200
MAX_QUEUE = 200
MIN_INTERVAL, MAX_INTERVAL = timedelta(seconds=1), timedelta(days=366)
SCHEDULER = "z4j"  # schedules.scheduler of the brain's own schedules, applied by its beat
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_INTERVAL = re.compile(r"(?:(\d{1,8})([smhd]))+")
_PART = re.compile(r"(\d{1,8})([smhd])")
_REFERENCE = datetime(2000, 1, 1, tzinfo=UTC)  # any instant: the search spans the calendar's cycle
_TASK_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.:\-]*")


class Kind(StrEnum):
    CRON = "cron"
    INTERVAL = "interval"
    DATE = "date"


class ScheduleInvalid(FieldInvalid):
    """A schedule's field refused."""


@dataclass(frozen=True, slots=True)
class Timing:
    """A parsed kind and expression on a zone: what ``next_run`` needs."""

    kind: Kind
    expression: str
    zone: ZoneInfo
    cron: cron.Cron | None = None
    every: timedelta | None = None
    at: datetime | None = None


def parse_interval(text: str) -> timedelta:
    text = text.strip().lower()
    if text.isascii() and text.isdigit() and len(text) <= 8:
        every = timedelta(seconds=int(text))
    elif _INTERVAL.fullmatch(text):
        seconds = sum(int(n) * _UNITS[unit] for n, unit in _PART.findall(text))
        every = timedelta(seconds=seconds)
    else:
        raise ScheduleInvalid("expression", "must be a period such as 30s, 5m, 1h30m or 1d")
    if not MIN_INTERVAL <= every <= MAX_INTERVAL:
        raise ScheduleInvalid("expression", "must be between 1 second and 366 days")
    return every


def parse_date(text: str, zone: ZoneInfo) -> datetime:
    try:
        at = datetime.fromisoformat(text.strip())
    except ValueError:
        raise ScheduleInvalid(
            "expression", "must be an ISO 8601 time, e.g. 2027-01-31T09:00"
        ) from None
    at = at.replace(tzinfo=zone) if at.tzinfo is None else at
    try:
        at.astimezone(UTC)  # stored as timestamptz, read back as a datetime: within years 1-9999
    except OverflowError:
        raise ScheduleInvalid("expression", "is outside the years 1 to 9999 in UTC") from None
    return at


def zone_of(name: object) -> ZoneInfo:
    if not isinstance(name, str) or not 0 < len(name) <= 64 or "\x00" in name:
        raise ScheduleInvalid("timezone", "must be an IANA time zone name")
    try:
        return ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        raise ScheduleInvalid("timezone", "is not a known IANA time zone name") from None


def timing(kind: str, expression: str, timezone: str = DEFAULT_TIMEZONE) -> Timing:
    """Parse and check a kind and expression; raises ``ScheduleInvalid`` naming the field."""
    try:
        parsed = Kind(kind)
    except ValueError:
        raise ScheduleInvalid("schedule_type", "must be cron, interval or date") from None
    if not isinstance(expression, str) or not 0 < len(expression) <= MAX_EXPRESSION:
        raise ScheduleInvalid("expression", f"must be 1 to {MAX_EXPRESSION} characters")
    zone = zone_of(timezone)
    if parsed is Kind.CRON:
        try:
            rule = cron.parse(expression)
        except cron.CronInvalid as exc:
            raise ScheduleInvalid("expression", str(exc)) from None
        if cron.next_after(rule, _REFERENCE, zone) is None:
            raise ScheduleInvalid("expression", "matches no date (such as 30 February)")
        return Timing(parsed, expression, zone, cron=rule)
    if parsed is Kind.INTERVAL:
        return Timing(parsed, expression, zone, every=parse_interval(expression))
    return Timing(parsed, expression, zone, at=parse_date(expression, zone))


def next_run(spec: Timing, after: datetime, last_run_at: datetime | None) -> datetime | None:
    """When the schedule runs next, seen at ``after`` (aware); None when it never will.

    An interval counts from its last run (from ``after`` before the first); a date runs once."""
    if spec.cron is not None:
        return cron.next_after(spec.cron, after, spec.zone)
    if spec.every is not None:
        return (last_run_at or after) + spec.every
    assert spec.at is not None
    return spec.at if last_run_at is None else None


def check_name(name: object) -> str:
    if not isinstance(name, str) or not 0 < len(name.strip()) <= MAX_NAME or "\x00" in name:
        raise ScheduleInvalid("name", f"must be 1 to {MAX_NAME} characters")
    return name.strip()


def check_task(task: object) -> str:
    if not isinstance(task, str) or len(task) > MAX_TASK or not _TASK_NAME.fullmatch(task):
        raise ScheduleInvalid("task", "must be a task name such as app.tasks.send_report")
    return task


def check_queue(queue: object) -> str | None:
    if queue is None or queue == "":
        return None
    if not isinstance(queue, str) or len(queue) > MAX_QUEUE or not _TASK_NAME.fullmatch(queue):
        raise ScheduleInvalid("queue", "must be a queue name of letters, digits, '_.:-'")
    return queue


# States of the previous run's task that mean it has not finished (sent, running, retrying).
UNFINISHED = frozenset({"pending", "started", "retried"})


# A run the brain has not heard of yet (its agent ships within seconds) counts as unfinished
# this long after it was sent; past it, a run never reported does not block the schedule.
UNSEEN_GRACE = timedelta(seconds=60)


def _unfinished(row: dict[str, Any], previous_state: str | None, now: datetime) -> bool:
    if previous_state is not None:
        return previous_state in UNFINISHED
    sent = isinstance(row["metadata"].get("last_task_id"), str) and row["last_run_at"] is not None
    return sent and now - row["last_run_at"] < UNSEEN_GRACE


@dataclass(frozen=True, slots=True)
class Claim:
    """What a claim of a due slot writes: the run's time and the next slot. ``skip``: the slot
    is spent without a run, as the previous run has not finished (``skip_if_running``)."""

    last_run_at: datetime
    next_run_at: datetime | None
    skip: bool = False


def claim(
    row: dict[str, Any],
    spec: Timing,
    slot: datetime,
    now: datetime,
    previous_state: str | None = None,
) -> Claim | None:
    """The claim of ``slot`` on the current ``row``, or None when it is not to be fired: the
    schedule is off, the slot is not its current one (another beat fired it, or it changed),
    or the slot has not come yet. ``previous_state`` is the brain's state of the task the last
    run sent (None when not seen): with ``skip_if_running`` an unfinished one spends the slot,
    and so does one sent less than ``UNSEEN_GRACE`` ago that the brain has not seen yet."""
    if not row["enabled"] or row["next_run_at"] is None or row["next_run_at"] != slot:
        return None
    if slot > now:
        return None
    if row["metadata"].get("skip_if_running") is True and _unfinished(row, previous_state, now):
        return Claim(row["last_run_at"], next_run(spec, now, now), skip=True)
    return Claim(now, next_run(spec, now, now))


MAX_ARGUMENTS_BYTES = 64 * 1024
FIELDS = ("name", "task", "schedule_type", "expression", "args", "kwargs", "enabled",
          "timezone", "queue", "agent_id", "skip_if_running")  # fmt: skip


def _arguments(values: dict[str, Any]) -> tuple[list[Any], dict[str, Any]]:
    args, kwargs = values["args"], values["kwargs"]
    if not isinstance(args, list):
        raise ScheduleInvalid("args", "must be a list")
    if not isinstance(kwargs, dict) or not all(isinstance(k, str) for k in kwargs):
        raise ScheduleInvalid("kwargs", "must be an object")
    text = json.dumps([args, kwargs], default=str)
    if len(text) > MAX_ARGUMENTS_BYTES:
        raise ScheduleInvalid("args", f"args and kwargs take at most {MAX_ARGUMENTS_BYTES} bytes")
    for name, value in (("args", args), ("kwargs", kwargs)):
        # what PostgreSQL's jsonb cannot hold, or a Celery message should not: NUL, a lone
        # surrogate, an integer past bigint, a non-finite number
        found = find_unstorable(value, path=name)
        if found is not None:
            raise ScheduleInvalid(found.path, found.reason)
    return args, kwargs


def definition(
    change: dict[str, Any], current: dict[str, Any] | None, default_zone: str
) -> tuple[dict[str, Any], Timing]:
    """The columns of a schedule with ``change`` applied to ``current`` (a new one when None),
    checked, and its parsed timing. Raises ``ScheduleInvalid`` naming the first bad field."""
    for key in change:
        if key not in FIELDS:
            raise ScheduleInvalid(key, "is not a schedule field")
    meta = dict(current["metadata"]) if current else {}
    base: dict[str, Any] = {
        "name": None, "task": None, "schedule_type": None, "expression": None, "args": [],
        "kwargs": {}, "enabled": True, "timezone": meta.get("timezone", default_zone),
        "queue": meta.get("queue"), "agent_id": None,
        "skip_if_running": meta.get("skip_if_running", False),
    }  # fmt: skip
    if current:
        base |= {k: current[k] for k in base if k in current}
    values = base | change
    for flag in ("enabled", "skip_if_running"):
        if not isinstance(values[flag], bool):
            raise ScheduleInvalid(flag, "must be true or false")
    name, task = check_name(values["name"]), check_task(values["task"])
    spec = timing(str(values["schedule_type"]), values["expression"], values["timezone"])
    args, kwargs = _arguments(values)
    queue = check_queue(values["queue"])
    meta |= {"timezone": spec.zone.key, "skip_if_running": values["skip_if_running"]}
    if queue is None:
        meta.pop("queue", None)
    else:
        meta["queue"] = queue
    columns = {
        "name": name, "task": task, "schedule_type": spec.kind.value,
        "expression": spec.expression.strip(), "args": args, "kwargs": kwargs,
        "enabled": values["enabled"], "metadata": meta, "agent_id": values["agent_id"],
    }  # fmt: skip
    return columns, spec


def timing_changed(before: dict[str, Any], after: dict[str, Any]) -> bool:
    keys = ("schedule_type", "expression", "enabled")
    zone = before["metadata"].get("timezone") != after["metadata"].get("timezone")
    return zone or any(before[k] != after[k] for k in keys)


def first_run(spec: Timing, now: datetime, last_run_at: datetime | None) -> datetime | None:
    """The next run of a schedule just created, edited or enabled at ``now``. A date already
    past is refused: it would fire at once, which an edit rarely means."""
    if spec.at is not None and last_run_at is None and spec.at <= now:
        raise ScheduleInvalid("expression", "is in the past")
    return next_run(spec, now, last_run_at)
