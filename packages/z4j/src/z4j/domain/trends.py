"""Trend windows and the series drawn from them: pure, no I/O.

A window (``1h``, ``6h``, ``24h``, ``7d``, ``30d``) is cut into a fixed number of equal
buckets; the store returns one row per bucket that has finished tasks, and ``fill`` lays them
on the full run of buckets so that an idle bucket shows as zero throughput and no runtime.
Buckets are aligned to the epoch (``date_bin``), so the same window asked twice a minute apart
shares its buckets but the newest.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta


@dataclass(frozen=True, slots=True)
class Window:
    key: str
    label: str
    span: timedelta
    step: timedelta

    @property
    def buckets(self) -> int:
        return int(self.span / self.step)

    def bounds(self, now: datetime) -> tuple[datetime, datetime]:
        """(first bucket's start, end): the end is the start of the bucket after ``now``."""
        end = bucket_start(now, self.step) + self.step
        return end - self.span, end


WINDOWS: dict[str, Window] = {
    w.key: w
    for w in (
        Window("1h", "last hour", timedelta(hours=1), timedelta(minutes=1)),
        Window("6h", "last 6 hours", timedelta(hours=6), timedelta(minutes=5)),
        Window("24h", "last 24 hours", timedelta(hours=24), timedelta(minutes=20)),
        Window("7d", "last 7 days", timedelta(days=7), timedelta(hours=2)),
        Window("30d", "last 30 days", timedelta(days=30), timedelta(hours=12)),
    )
}
DEFAULT_WINDOW = "24h"
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def window_of(key: str | None) -> Window | None:
    """The window named ``key`` (the default when empty); None for an unknown name."""
    return WINDOWS.get(key or DEFAULT_WINDOW)


def bucket_start(moment: datetime, step: timedelta) -> datetime:
    return EPOCH + ((moment - EPOCH) // step) * step


@dataclass(frozen=True, slots=True)
class Bucket:
    start: datetime
    finished: int = 0  # tasks that succeeded or failed in the bucket
    failed: int = 0
    p50_ms: float | None = None
    p95_ms: float | None = None

    @property
    def failure_rate(self) -> float | None:
        """Failed tasks as a percentage of finished ones; None when none finished."""
        return None if self.finished == 0 else 100.0 * self.failed / self.finished


def fill(window: Window, start: datetime, rows: Iterable[Bucket]) -> list[Bucket]:
    """Every bucket of the window from ``start``, taking a row's values where one exists
    (rows outside the window are ignored)."""
    by_start = {row.start: row for row in rows}
    out = []
    for i in range(window.buckets):
        moment = start + i * window.step
        out.append(by_start.get(moment) or Bucket(moment))
    return out


@dataclass(frozen=True, slots=True)
class Totals:
    finished: int
    failed: int

    @property
    def failure_rate(self) -> float | None:
        return None if self.finished == 0 else 100.0 * self.failed / self.finished


def totals(buckets: Iterable[Bucket]) -> Totals:
    finished = failed = 0
    for b in buckets:
        finished += b.finished
        failed += b.failed
    return Totals(finished, failed)
