"""CPU time of the benchmark's processes, from ``/proc`` (Linux only; elsewhere nothing is
measured).

A service is a process tree: the process, every live descendant, and what each of them has
already reaped (``cutime``/``cstime``), so PostgreSQL backends and granian workers that come and
go are counted whether or not they are still alive. The benchmark client is its own process
alone: its children are the services.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

PROC = Path("/proc")
_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _stat(pid: int) -> list[str] | None:
    """The fields of ``/proc/<pid>/stat`` after the command name (state is field 0)."""
    try:
        text = (PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    return text.rpartition(")")[2].split()


def _children() -> dict[int, list[int]]:
    tree: dict[int, list[int]] = {}
    for entry in PROC.iterdir():
        if entry.name.isdigit() and (fields := _stat(int(entry.name))) is not None:
            tree.setdefault(int(fields[1]), []).append(int(entry.name))
    return tree


def _own_s(fields: list[str], *, reaped: bool) -> float:
    ticks = int(fields[11]) + int(fields[12])  # utime, stime
    if reaped:
        ticks += int(fields[13]) + int(fields[14])  # cutime, cstime
    return ticks / _TICKS


def tree_cpu_s(pid: int, children: Mapping[int, list[int]]) -> float:
    total, todo = 0.0, [pid]
    while todo:
        current = todo.pop()
        fields = _stat(current)
        if fields is not None:
            total += _own_s(fields, reaped=True)
        todo.extend(children.get(current, ()))
    return total


class CpuMeter:
    """CPU seconds per named part: services by their root pid, plus this process alone as
    ``client``. ``take()`` snapshots; ``per_message(before, after, n)`` gives ms per message."""

    def __init__(self, services: Mapping[str, int | None]) -> None:
        self.services = {name: pid for name, pid in services.items() if pid is not None}

    @staticmethod
    def available() -> bool:
        return (PROC / "self" / "stat").exists()

    def take(self) -> dict[str, float]:
        if not self.available():
            return {}
        children = _children()
        taken = {name: tree_cpu_s(pid, children) for name, pid in self.services.items()}
        fields = _stat(os.getpid())
        if fields is not None:
            taken["client"] = _own_s(fields, reaped=False)
        return taken

    @staticmethod
    def per_message(
        before: Mapping[str, float], after: Mapping[str, float], messages: int
    ) -> dict[str, float] | None:
        if not before or not after or messages <= 0:
            return None
        parts = {
            name: round((after[name] - before[name]) * 1000 / messages, 3)
            for name in before
            if name in after
        }
        parts["total"] = round(sum(parts.values()), 3)
        return parts
