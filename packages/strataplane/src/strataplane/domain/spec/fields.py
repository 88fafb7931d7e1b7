"""Typed reading of the fields of one table, reporting SP-2001 … SP-2004 as it goes.

Kind checks read their fields through ``Fields``: each accessor returns the value when it has
the right type and passes its rule, and otherwise reports and returns None, so one pass finds
every problem of a file. The value types of spec-format.md §1.4 (durations, slugs, agent kinds)
live here too.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from strataplane.domain.spec.diagnostics import Collector, at

__all__ = [
    "AGENT_KINDS",
    "LOCAL_NAME",
    "TEAM_SLUG",
    "Fields",
    "parse_duration",
]

AGENT_KINDS = ("telegraf", "elastic-agent", "strataplane-agent", "vector")
TEAM_SLUG = re.compile(r"[a-z0-9][a-z0-9-]{0,62}")
LOCAL_NAME = re.compile(r"[a-z0-9][a-z0-9-]{0,62}")  # rule and stage names
_DURATION = re.compile(r"(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m(?!s))?(?:(\d+)s)?(?:(\d+)ms)?")
_UNITS_MS = (86_400_000, 3_600_000, 60_000, 1000, 1)


def parse_duration(text: str) -> int | None:
    """Milliseconds of a duration such as ``"1h30m"``, None when it breaks the rule."""
    m = _DURATION.fullmatch(text)
    if m is None or not text:
        return None
    return sum(int(g) * unit for g, unit in zip(m.groups(), _UNITS_MS, strict=True) if g)


def _type_name(value: object) -> str:
    names = {bool: "boolean", int: "integer", float: "float", str: "string", list: "array"}
    return "table" if isinstance(value, Mapping) else names.get(type(value), type(value).__name__)


@dataclass
class Fields:
    """The fields of the table at ``pointer`` in one file."""

    out: Collector
    table: Mapping[str, object]
    pointer: str | None = None

    def at(self, key: str | int) -> str:
        return at(self.pointer, key)

    def known(self, allowed: Iterable[str], required: Iterable[str] = (), hint: str = "") -> None:
        """SP-2002 for every field not in ``allowed``, SP-2001 for each missing required one."""
        allowed = set(allowed)
        for key in sorted(set(self.table) - allowed):
            self.out.add("SP-2002", self.at(key), f"unknown field {key!r}{hint}")
        for key in required:
            if key not in self.table:
                self.out.add("SP-2001", self.pointer, f"required field {key!r} is missing")

    def _typed(self, key: str, types: tuple[type, ...], expected: str) -> object | None:
        value = self.table.get(key)
        if value is None:
            return None
        bad_bool = isinstance(value, bool) and bool not in types
        if bad_bool or not isinstance(value, types):
            self.out.add("SP-2003", self.at(key), f"expected {expected}, got {_type_name(value)}")
            return None
        return value

    def invalid(self, key: str | int, message: str) -> None:
        self.out.add("SP-2004", self.at(key), message)

    def string(
        self,
        key: str,
        *,
        pattern: re.Pattern[str] | None = None,
        choices: Iterable[str] | None = None,
        what: str = "value",
    ) -> str | None:
        value = self._typed(key, (str,), "a string")
        if not isinstance(value, str):
            return None
        if pattern is not None and not pattern.fullmatch(value):
            self.invalid(key, f"invalid {what} {value!r}")
            return None
        if choices is not None and value not in (options := tuple(choices)):
            self.invalid(key, f"{value!r} is not one of {', '.join(options)}")
            return None
        return value

    def integer(self, key: str, lo: int, hi: int | None = None) -> int | None:
        value = self._typed(key, (int,), "an integer")
        if not isinstance(value, int):
            return None
        if value < lo or (hi is not None and value > hi):
            bounds = f"from {lo} to {hi}" if hi is not None else f"at least {lo}"
            self.invalid(key, f"{value} is out of range: {key} must be {bounds}")
            return None
        return value

    def number(self, key: str, lo: float, hi: float) -> float | None:
        value = self._typed(key, (int, float), "a number")
        if not isinstance(value, int | float):
            return None
        if not lo <= value <= hi:
            self.invalid(key, f"{value} is outside {lo:g} … {hi:g}")
            return None
        return float(value)

    def boolean(self, key: str) -> bool | None:
        value = self._typed(key, (bool,), "a boolean")
        return value if isinstance(value, bool) else None

    def duration(self, key: str) -> int | None:
        """Milliseconds, or None (SP-2004 for a malformed duration)."""
        text = self._typed(key, (str,), "a duration string")
        if not isinstance(text, str):
            return None
        ms = parse_duration(text)
        if ms is None:
            self.invalid(key, f'invalid duration {text!r} (e.g. "90s", "1h30m", "7d")')
        return ms

    def array(self, key: str) -> list[object] | None:
        value = self._typed(key, (list,), "an array")
        return value if isinstance(value, list) else None

    def strings(
        self, key: str, *, pattern: re.Pattern[str] | None = None, what: str = "value"
    ) -> list[str] | None:
        """An array of strings; elements of the wrong type or breaking ``pattern`` are reported."""
        items = self.array(key)
        if items is None:
            return None
        good: list[str] = []
        for i, item in enumerate(items):
            if not isinstance(item, str):
                self.out.add(
                    "SP-2003", at(self.at(key), i), f"expected a string, got {_type_name(item)}"
                )
            elif pattern is not None and not pattern.fullmatch(item):
                self.out.add("SP-2004", at(self.at(key), i), f"invalid {what} {item!r}")
            else:
                good.append(item)
        return good

    def table_at(self, key: str) -> Mapping[str, object] | None:
        value = self._typed(key, (Mapping,), "a table")
        return value if isinstance(value, Mapping) else None

    def sub(self, key: str) -> Fields | None:
        table = self.table_at(key)
        return None if table is None else Fields(self.out, table, self.at(key))

    def tables(self, key: str) -> list[Fields] | None:
        """An array of tables, one ``Fields`` per element that is a table."""
        items = self.array(key)
        if items is None:
            return None
        found: list[Fields] = []
        for i, item in enumerate(items):
            if isinstance(item, Mapping):
                found.append(Fields(self.out, item, at(self.at(key), i)))
            else:
                self.out.add(
                    "SP-2003", at(self.at(key), i), f"expected a table, got {_type_name(item)}"
                )
        return found
