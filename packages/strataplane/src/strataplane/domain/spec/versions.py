"""Agent versions and ``agentVersions`` requirements (spec-format.md §2.4).

Versions are SemVer 2.0.0 ordered by precedence (build metadata ignored, a pre-release just
below its release). A requirement is an AND of comparators, each an interval; it is kept as one
interval ``[lower, upper)`` with an inclusive lower bound. Bounds the grammar derives as "the
next release" stand just below that release's pre-releases (``X.Y.Z-0``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = [
    "Requirement",
    "RequirementError",
    "Version",
    "parse_requirement",
    "parse_version",
]

_NUM = r"0|[1-9][0-9]*"
_IDENT = r"[0-9A-Za-z-]+"
_VERSION = re.compile(
    rf"(?P<major>{_NUM})\.(?P<minor>{_NUM})\.(?P<patch>{_NUM})"
    rf"(?:-(?P<pre>{_IDENT}(?:\.{_IDENT})*))?(?:\+(?P<build>{_IDENT}(?:\.{_IDENT})*))?"
)
_COMPARATOR = re.compile(
    rf"(?P<op>>=|<=|=|>|<|~|\^)?\s*(?P<major>{_NUM})(?:\.(?P<minor>{_NUM})"
    rf"(?:\.(?P<patch>{_NUM})(?:-(?P<pre>{_IDENT}(?:\.{_IDENT})*))?)?)?"
)


class RequirementError(ValueError):
    """A requirement that is not in the grammar (SP-3006)."""


@dataclass(frozen=True, slots=True)
class Version:
    major: int
    minor: int
    patch: int
    pre: tuple[int | str, ...] = ()

    def _key(self) -> tuple[int, int, int, int, tuple[tuple[int, int | str], ...]]:
        # A release sorts after its pre-releases; numeric identifiers sort before alphanumeric.
        ids = tuple((0, i) if isinstance(i, int) else (1, i) for i in self.pre)
        return (self.major, self.minor, self.patch, 0 if self.pre else 1, ids)

    def __lt__(self, other: Version) -> bool:
        return self._key() < other._key()

    def __le__(self, other: Version) -> bool:
        return self._key() <= other._key()

    def successor(self) -> Version:
        """The smallest version greater than this one."""
        if self.pre:
            return Version(self.major, self.minor, self.patch, (*self.pre, 0))
        return Version(self.major, self.minor, self.patch + 1, (0,))

    def __str__(self) -> str:
        pre = "-" + ".".join(str(i) for i in self.pre) if self.pre else ""
        return f"{self.major}.{self.minor}.{self.patch}{pre}"


_LOWEST = Version(0, 0, 0, (0,))  # the smallest version there is


def _pre(text: str | None) -> tuple[int | str, ...]:
    if not text:
        return ()
    ids: list[int | str] = []
    for ident in text.split("."):
        if ident.isdigit():
            if len(ident) > 1 and ident[0] == "0":
                raise ValueError(f"numeric pre-release identifier {ident!r} has a leading zero")
            ids.append(int(ident))
        else:
            ids.append(ident)
    return tuple(ids)


def parse_version(text: str) -> Version:
    """Parse a full SemVer version; ValueError when ``text`` is not one."""
    m = _VERSION.fullmatch(text.strip())
    if m is None:
        raise ValueError(f"{text!r} is not a SemVer version")
    return Version(int(m["major"]), int(m["minor"]), int(m["patch"]), _pre(m["pre"]))


@dataclass(frozen=True, slots=True)
class Requirement:
    """An interval: ``lower <= v`` (None: no bound) and ``v < upper`` (None: no bound)."""

    text: str
    lower: Version | None
    upper: Version | None

    @property
    def satisfiable(self) -> bool:
        return self.upper is None or (self.lower or _LOWEST) < self.upper

    def matches(self, version: Version | str | None) -> bool:
        """Whether ``version`` satisfies the requirement; an unknown version never does."""
        if isinstance(version, str):
            try:
                version = parse_version(version)
            except ValueError:
                return False
        if version is None:
            return False
        if self.lower is not None and version < self.lower:
            return False
        return self.upper is None or version < self.upper


def _next(major: int, minor: int | None) -> Version:
    if minor is None:
        return Version(major + 1, 0, 0, (0,))
    return Version(major, minor + 1, 0, (0,))


def _interval(m: re.Match[str]) -> tuple[Version | None, Version | None]:
    op = m["op"] or "="
    major = int(m["major"])
    minor = None if m["minor"] is None else int(m["minor"])
    patch = None if m["patch"] is None else int(m["patch"])
    base = Version(major, minor or 0, patch or 0, _pre(m["pre"]))
    full = patch is not None
    # "next": just below the first version that the partial (or ~/^) no longer covers.
    if op == "^":
        if major > 0 or minor is None:
            nxt = _next(major, None)
        elif minor > 0 or patch is None:
            nxt = _next(major, minor)
        else:
            nxt = Version(0, 0, patch + 1, (0,))
    elif op == "~":
        nxt = _next(major, minor if minor is not None else None)
    else:
        nxt = base.successor() if full else _next(major, minor)
    match op:
        case "=":
            return base, nxt
        case ">=":
            return base, None
        case ">":
            return nxt, None
        case "<":
            return None, base
        case "<=":
            return None, nxt
        case _:  # "~" and "^"
            return base, nxt


def parse_requirement(text: str) -> Requirement:
    """Parse ``agentVersions``; ``RequirementError`` (SP-3006) when not in the grammar."""
    if text.strip() == "*":
        return Requirement(text, None, None)
    lower: Version | None = None
    upper: Version | None = None
    for part in text.split(","):
        m = _COMPARATOR.fullmatch(part.strip())
        if m is None:
            raise RequirementError(f"{part.strip()!r} is not a version comparator")
        try:
            lo, hi = _interval(m)
        except ValueError as exc:
            raise RequirementError(str(exc)) from None
        if lo is not None and (lower is None or lower < lo):
            lower = lo
        if hi is not None and (upper is None or hi < upper):
            upper = hi
    return Requirement(text, lower, upper)
