"""CPU time of the benchmark's processes, read from ``/proc`` (Linux; elsewhere 0): a process
with its descendants (granian and its workers, the simulator), and the PostgreSQL backends
connected to one database (their process title names it)."""

from __future__ import annotations

import os
from pathlib import Path

_PROC = Path("/proc")
_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _stat(pid: str) -> tuple[int, float] | None:
    """(parent pid, CPU seconds in user and kernel mode) of a live process."""
    try:
        text = (_PROC / pid / "stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2 :].split()  # the command name may hold spaces
    return int(fields[1]), (int(fields[11]) + int(fields[12])) / _TICK


def _pids() -> list[str]:
    try:
        return [p.name for p in _PROC.iterdir() if p.name.isdigit()]
    except OSError:
        return []


def tree_seconds(root: int) -> float:
    """CPU seconds of ``root`` and its live descendants."""
    stats = {int(pid): s for pid in _pids() if (s := _stat(pid)) is not None}
    children: dict[int, list[int]] = {}
    for pid, (parent, _cpu) in stats.items():
        children.setdefault(parent, []).append(pid)
    total, todo = 0.0, [root]
    while todo:
        pid = todo.pop()
        found = stats.get(pid)
        if found is not None:
            total += found[1]
        todo.extend(children.get(pid, ()))
    return total


def backend_seconds(database: str) -> float:
    """CPU seconds of the live PostgreSQL backends connected to ``database``."""
    total = 0.0
    needle = f" {database} ".encode()
    for pid in _pids():
        try:
            title = (_PROC / pid / "cmdline").read_bytes()
        except OSError:
            continue
        if title.startswith(b"postgres: ") and needle in title:
            found = _stat(pid)
            total += found[1] if found is not None else 0.0
    return total
