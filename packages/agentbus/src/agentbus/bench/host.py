"""How steady the machine's CPU is while the benchmark runs.

A fixed piece of arithmetic (about a millisecond) runs back to back for a few seconds; the probe
reports how much of that time went to pieces that took more than twice the median, and in how
many separate stretches. On a shared virtual machine the host can slow a guest's CPU several
times over for a tenth of a second at a time, at a regular period: every request in flight then
takes longer at once, and a run's p99 measures the host as much as the gateway. The benchmark
prints this line first so its latency figures can be read against it.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

SLOW_FACTOR = 2.0
WINDOW_GAP_S = 0.05  # slow pieces closer than this belong to one stretch
_PIECE_STEPS = 20_000


@dataclass(frozen=True)
class Steadiness:
    seconds: float
    median_piece_ms: float
    slow_share: float  # of the probe's time, in pieces slower than SLOW_FACTOR x the median
    slow_windows: int
    longest_window_ms: float

    def summary(self) -> dict[str, Any]:
        return {
            "bench": "host",
            "probe_s": round(self.seconds, 1),
            "median_piece_ms": round(self.median_piece_ms, 3),
            "slow_share": round(self.slow_share, 4),
            "slow_windows_per_min": round(60 * self.slow_windows / self.seconds, 1)
            if self.seconds
            else None,
            "longest_slow_window_ms": round(self.longest_window_ms, 1),
        }


def analyse(pieces: Sequence[tuple[float, float]]) -> Steadiness:
    """``pieces``: (start, duration) of each piece in seconds, in the order they ran."""
    if not pieces:
        return Steadiness(0.0, 0.0, 0.0, 0, 0.0)
    median = statistics.median(duration for _, duration in pieces)
    total = sum(duration for _, duration in pieces)
    slow = [(start, duration) for start, duration in pieces if duration > SLOW_FACTOR * median]
    windows: list[tuple[float, float]] = []  # (first start, last end)
    for start, duration in slow:
        if windows and start - windows[-1][1] <= WINDOW_GAP_S:
            windows[-1] = (windows[-1][0], start + duration)
        else:
            windows.append((start, start + duration))
    first_start, last_start, last_duration = pieces[0][0], pieces[-1][0], pieces[-1][1]
    return Steadiness(
        seconds=last_start + last_duration - first_start,
        median_piece_ms=median * 1000,
        slow_share=sum(duration for _, duration in slow) / total if total else 0.0,
        slow_windows=len(windows),
        longest_window_ms=max((end - begin for begin, end in windows), default=0.0) * 1000,
    )


def _piece() -> int:
    total = 0
    for i in range(_PIECE_STEPS):
        total += i * i
    return total


def probe(seconds: float = 5.0) -> Steadiness:
    """Run pieces back to back for ``seconds`` (this process, one core)."""
    for _ in range(20):
        _piece()
    pieces: list[tuple[float, float]] = []
    clock = time.perf_counter
    end = clock() + seconds
    while (start := clock()) < end:
        _piece()
        pieces.append((start, clock() - start))
    return analyse(pieces)
