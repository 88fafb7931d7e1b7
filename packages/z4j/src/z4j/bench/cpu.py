"""CPU time of the processes a benchmark drives, read from ``/proc`` (Linux).

Wall-clock throughput on a shared machine says little about the cost of a code path, so the
benchmarks also report CPU seconds per unit of work for each side: the client (this process),
the server's process with all its descendants and the PostgreSQL backends serving the
benchmark's database.
Elsewhere than Linux the figures are absent rather than wrong.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable
from pathlib import Path

_PROC = Path("/proc")


def _stat_fields(pid: int) -> list[str] | None:
    try:
        text = (_PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    # The command name (field 2) may hold spaces; everything after its closing paren splits.
    return text[text.rindex(")") + 2 :].split()


def process_seconds(pids: Iterable[int]) -> dict[int, float]:
    """User plus system CPU seconds used so far by each live process of ``pids``."""
    ticks = os.sysconf("SC_CLK_TCK")
    used = {}
    for pid in pids:
        fields = _stat_fields(pid)
        if fields is not None:
            used[pid] = (int(fields[11]) + int(fields[12])) / ticks  # utime, stime
    return used


def used_between(before: dict[int, float], after: dict[int, float]) -> float:
    """CPU seconds the processes alive at the end used since ``before`` (new ones: all of it)."""
    return sum(seconds - before.get(pid, 0.0) for pid, seconds in after.items())


def descendants(pid: int) -> list[int]:
    """``pid`` and every live process below it, whatever session or group a child moved to
    (the HTTP server runs in a session of its own)."""
    parents: dict[int, list[int]] = {}
    for entry in _PROC.iterdir() if _PROC.is_dir() else ():
        if entry.name.isdigit():
            fields = _stat_fields(int(entry.name))
            if fields is not None:
                parents.setdefault(int(fields[1]), []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        found.append(current)
        todo.extend(parents.get(current, ()))
    return found


def available() -> bool:
    return _PROC.is_dir() and (_PROC / str(os.getpid()) / "stat").exists()


def client_seconds() -> dict[int, float]:
    return {os.getpid(): time.process_time()}
