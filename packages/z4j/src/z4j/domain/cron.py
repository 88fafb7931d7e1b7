"""Five-field cron expressions and the next time one matches, in a time zone.

Fields are minute (0-59), hour (0-23), day of month (1-31), month (1-12 or jan-dec) and day of
week (0-7 or sun-sat, 0 and 7 both Sunday). Each field is ``*``, a value, a range ``a-b``, any
of those with a step (``*/15``, ``1-30/2``), or a comma list of them. As in Vixie cron, when
both day fields are restricted a day matches if either does.

Times are matched on the zone's wall clock. A wall time skipped by a daylight-saving change
does not fire that day; a wall time that happens twice fires once, at its first occurrence.

Pure: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo

MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
DAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
# (name, low, high, names whose index plus low is the value)
_FIELDS = (
    ("minute", 0, 59, ()),
    ("hour", 0, 23, ()),
    ("day of month", 1, 31, ()),
    ("month", 1, 12, MONTHS),
    ("day of week", 0, 7, DAYS),
)
# The Gregorian calendar repeats every 400 years, weekdays included: a search that finds nothing
# in that long never will (a day and a weekday both restricted can match decades apart).
HORIZON_DAYS = 146_097 + 1


class CronInvalid(ValueError):
    """The expression is not a five-field cron expression; the message says which part."""


@dataclass(frozen=True, slots=True)
class Cron:
    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]  # 0 Sunday .. 6 Saturday
    days_restricted: bool
    weekdays_restricted: bool

    def day_matches(self, day: date) -> bool:
        if day.month not in self.months:
            return False
        dom = day.day in self.days
        dow = (day.isoweekday() % 7) in self.weekdays
        if self.days_restricted and self.weekdays_restricted:
            return dom or dow
        return dom and dow


def _value(text: str, low: int, high: int, names: tuple[str, ...], field: str) -> int:
    lowered = text.lower()
    if lowered in names:
        return names.index(lowered) + (low if names is MONTHS else 0)
    if not text.isascii() or not text.isdigit() or len(text) > 2:
        raise CronInvalid(f"{field}: {text[:20]!r} is not a number or a name")
    value = int(text)
    if not low <= value <= high:
        raise CronInvalid(f"{field}: {value} is outside {low}-{high}")
    return value


def _field(text: str, low: int, high: int, names: tuple[str, ...], field: str) -> set[int]:
    values: set[int] = set()
    for part in text.split(","):
        base, slash, step_text = part.partition("/")
        step = 1
        if slash:
            if not step_text.isascii() or not step_text.isdigit() or not 0 < int(step_text) <= 59:
                raise CronInvalid(f"{field}: the step {step_text[:20]!r} must be 1-59")
            step = int(step_text)
        if base == "*":
            start, end = low, high
        elif "-" in base:
            first, _, last = base.partition("-")
            start = _value(first, low, high, names, field)
            end = _value(last, low, high, names, field)
            if start > end:
                raise CronInvalid(f"{field}: the range {base!r} runs backwards")
        else:
            start = _value(base, low, high, names, field)
            end = high if slash else start
        values.update(range(start, end + 1, step))
    return values


def parse(expression: str) -> Cron:
    parts = expression.split()
    if len(parts) != len(_FIELDS):
        raise CronInvalid("a cron expression has five fields: minute hour day month weekday")
    sets = [_field(text, *spec[1:], spec[0]) for text, spec in zip(parts, _FIELDS, strict=True)]
    weekdays = frozenset(d % 7 for d in sets[4])
    return Cron(
        frozenset(sets[0]),
        frozenset(sets[1]),
        frozenset(sets[2]),
        frozenset(sets[3]),
        weekdays,
        # Vixie cron: a day field that starts with "*" (even "*/2") leaves the other in charge.
        days_restricted=not parts[2].startswith("*"),
        weekdays_restricted=not parts[4].startswith("*"),
    )


def _exists(local: datetime, zone: ZoneInfo) -> bool:
    """Whether the naive wall time ``local`` happens in ``zone`` (not skipped by a DST jump)."""
    aware = local.replace(tzinfo=zone)
    return aware.astimezone(UTC).astimezone(zone).replace(tzinfo=None) == local


def next_after(cron: Cron, after: datetime, zone: ZoneInfo) -> datetime | None:
    """The first matching instant strictly after ``after`` (aware), in UTC; None if the
    expression can never match (such as 30 February)."""
    start = after.astimezone(zone)
    day = start.date()
    end = day + timedelta(days=HORIZON_DAYS)
    while day < end:
        if day.month not in cron.months:  # skip to the first of the next month
            day = (day.replace(day=1) + timedelta(days=32)).replace(day=1)
            continue
        if cron.day_matches(day):
            for hour in sorted(cron.hours):
                if day == start.date() and hour < start.hour:
                    continue
                for minute in sorted(cron.minutes):
                    local = datetime.combine(day, time(hour, minute))
                    if not _exists(local, zone):
                        continue
                    instant = local.replace(tzinfo=zone, fold=0).astimezone(UTC)
                    if instant > after:
                        return instant
        day += timedelta(days=1)
    return None
