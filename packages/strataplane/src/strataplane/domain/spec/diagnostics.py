"""Diagnostics: the SP-NNNN codes of spec-format.md §5.3, their fixed severities, and ordering.

A diagnostic names the file it is about (``path``, None before the path is known), a
``pointer`` inside the file (dotted keys, ``[i]`` for array elements, None for the whole file)
and a message for people. Code and severity are stable; messages are not.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

__all__ = [
    "CODES",
    "Collector",
    "Diagnostic",
    "SpecError",
    "at",
    "has_errors",
    "key_pointer",
    "sort_diagnostics",
    "truncate",
]

type Severity = Literal["error", "warning", "info"]

_WARNINGS = {"SP-3005", "SP-3008", "SP-4011", "SP-4012", "SP-4014", "SP-5003", "SP-5007", "SP-5009"}
_INFOS = {"SP-1006", "SP-5010"}
# How many codes each group has: SP-1001 … SP-1006, SP-2001 … SP-2011, and so on.
_GROUP_SIZES = {1: 6, 2: 11, 3: 10, 4: 15, 5: 10, 6: 3}

CODES: dict[str, Severity] = {}
for _group, _count in _GROUP_SIZES.items():
    for _n in range(1, _count + 1):
        _code = f"SP-{_group}{_n:03d}"
        CODES[_code] = "warning" if _code in _WARNINGS else "info" if _code in _INFOS else "error"


@dataclass(frozen=True, slots=True)
class Diagnostic:
    """One finding. ``agent`` and ``artifact`` are set only for per-agent findings."""

    code: str
    path: str | None
    pointer: str | None
    message: str
    agent: str | None = None
    artifact: str | None = None

    @property
    def severity(self) -> Severity:
        return CODES[self.code]

    def to_json(self) -> dict[str, str | None]:
        """The object stored in ``change_set.validation.diagnostics`` (spec-format.md §5.2)."""
        return {
            "code": self.code,
            "severity": self.severity,
            "path": self.path,
            "pointer": self.pointer,
            "message": self.message,
            "agent": self.agent,
            "artifact": self.artifact,
        }


class SpecError(Exception):
    """Raised where a caller needs a value or a refusal (edits, API selector input)."""

    def __init__(self, diagnostics: Sequence[Diagnostic]) -> None:
        super().__init__("; ".join(f"{d.code} {d.message}" for d in diagnostics))
        self.diagnostics = tuple(diagnostics)


@dataclass
class Collector:
    """Accumulates the diagnostics of one file."""

    path: str | None = None
    diagnostics: list[Diagnostic] = field(default_factory=list)

    def add(self, code: str, pointer: str | None, message: str) -> None:
        if code not in CODES:
            raise ValueError(f"unknown diagnostic code {code}")
        self.diagnostics.append(Diagnostic(code, self.path, pointer, message))

    def extend(self, diagnostics: Iterable[Diagnostic]) -> None:
        self.diagnostics.extend(replace(d, path=self.path) for d in diagnostics)

    @property
    def ok(self) -> bool:
        return not has_errors(self.diagnostics)


_BARE = re.compile(r"[A-Za-z0-9_-]+")


def key_pointer(key: str) -> str:
    """A key as one pointer segment: bare when TOML allows it, else a quoted string."""
    if _BARE.fullmatch(key):
        return key
    return '"' + key.replace("\\", "\\\\").replace('"', '\\"') + '"'


def at(pointer: str | None, key: str | int) -> str:
    """Extend ``pointer`` by a table key or an array index."""
    if isinstance(key, int):
        return f"{pointer or ''}[{key}]"
    segment = key_pointer(key)
    return segment if not pointer else f"{pointer}.{segment}"


def has_errors(diagnostics: Iterable[Diagnostic]) -> bool:
    return any(d.severity == "error" for d in diagnostics)


def sort_diagnostics(diagnostics: Iterable[Diagnostic]) -> list[Diagnostic]:
    """Deterministic order: by path (bytes; whole-tree findings first), code, pointer, message."""
    return sorted(
        set(diagnostics),
        key=lambda d: (
            d.path or "",
            d.code,
            d.pointer or "",
            d.message,
            d.agent or "",
            d.artifact or "",
        ),
    )


def truncate(
    diagnostics: Sequence[Diagnostic], *, limit: int = 1000, per_code: int = 100
) -> tuple[list[Diagnostic], int]:
    """Keep at most ``per_code`` of each code and ``limit`` overall; return kept and dropped."""
    kept: list[Diagnostic] = []
    seen: Counter[str] = Counter()
    for d in diagnostics:
        if len(kept) < limit and seen[d.code] < per_code:
            kept.append(d)
            seen[d.code] += 1
    return kept, len(diagnostics) - len(kept)
