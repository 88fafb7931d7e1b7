"""Text and numbers bound for PostgreSQL: what it cannot store, found before a statement runs.

PostgreSQL refuses a NUL character in ``text`` and ``jsonb`` (psycopg raises
``UntranslatableCharacter``), a string with a lone surrogate cannot even be encoded as UTF-8,
and ``bigint`` stops at 2**63-1. A request carrying any of them must be refused with a 422 that
names the field, and data reported by agents must lose only the one bad item, never the batch:
both need the check before the database sees the value.

- :func:`unstorable_reason` for one string, :func:`find_unstorable` for a parsed JSON value
  (keys, values, nested lists), returning the first problem with its path;
- :func:`scrub` replaces NUL and lone surrogates by U+FFFD, for agent data kept and marked;
- :data:`PgText`, :data:`PgBigInt`, :data:`PgInt` and :data:`PgSmallInt` as pydantic field
  types, so FastAPI refuses such input with a 422 naming the field.
"""

from __future__ import annotations

import math
import re
from typing import Annotated, Any

from pydantic import AfterValidator, Field

__all__ = [
    "BIGINT_MAX",
    "BIGINT_MIN",
    "INT4_MAX",
    "INT4_MIN",
    "SMALLINT_MAX",
    "SMALLINT_MIN",
    "PgBigInt",
    "PgInt",
    "PgSmallInt",
    "PgText",
    "Unstorable",
    "find_unstorable",
    "scrub",
    "unstorable_reason",
]

BIGINT_MIN, BIGINT_MAX = -(2**63), 2**63 - 1
INT4_MIN, INT4_MAX = -(2**31), 2**31 - 1
SMALLINT_MIN, SMALLINT_MAX = -(2**15), 2**15 - 1

NUL_REASON = "contains a NUL character"
SURROGATE_REASON = "contains a lone surrogate"
RANGE_REASON = "integer out of range"
FINITE_REASON = "not a finite number"

_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")
REPLACEMENT = "\ufffd"


class Unstorable(ValueError):
    """A value PostgreSQL cannot store: ``path`` says where (``events[3].args.name``, ``""``
    for the value itself), ``loc`` the same as keys and indexes (``("events", 3, "args",
    "name")``, below any ``path`` prefix given to the search), ``reason`` what is wrong."""

    def __init__(self, path: str, reason: str, loc: tuple[str | int, ...] = ()) -> None:
        super().__init__(f"{path}: {reason}" if path else reason)
        self.path = path
        self.reason = reason
        self.loc = loc


def unstorable_reason(text: str) -> str | None:
    """Why PostgreSQL cannot store ``text``, or None when it can.

    The common case (plain text) costs one ``str.isascii`` or one regex scan in C.
    """
    if text.isascii():
        return None if "\x00" not in text else NUL_REASON
    found = _UNSTORABLE.search(text)
    if found is None:
        return None
    return NUL_REASON if found.group() == "\x00" else SURROGATE_REASON


# A path is built only for the one item reported: while walking, each child carries its parent's
# link and its own segment (a key or an index).
_Link = tuple[Any, str | int] | None


def _found(link: _Link, root: str, reason: str) -> Unstorable:
    segments: list[str | int] = []
    while link is not None:
        link, segment = link
        segments.append(segment)
    segments.reverse()
    path = root
    for segment in segments:
        if isinstance(segment, int):
            path += f"[{segment}]"
        elif segment.isidentifier():
            path = f"{path}.{segment}" if path else segment
        else:
            path += f"[{segment!r}]"
    return Unstorable(path, reason, tuple(segments))


def find_unstorable(
    value: object,
    *,
    path: str = "",
    int_min: int = BIGINT_MIN,
    int_max: int = BIGINT_MAX,
) -> Unstorable | None:
    """The first part of ``value`` (a parsed JSON value) PostgreSQL cannot store, or None.

    Strings (dictionary keys included) with NUL or a lone surrogate, integers outside
    ``int_min..int_max`` (bigint by default) and floats that are NaN or infinite. Walks
    iteratively, so a deep value cannot exhaust the stack; other types are left alone.
    """
    stack: list[tuple[_Link, object]] = [(None, value)]
    while stack:
        link, item = stack.pop()
        reason: str | None = None
        if isinstance(item, str):
            reason = unstorable_reason(item)
        elif isinstance(item, bool) or item is None:
            continue
        elif isinstance(item, int):
            if not int_min <= item <= int_max:
                reason = RANGE_REASON
        elif isinstance(item, float):
            if not math.isfinite(item):
                reason = FINITE_REASON
        elif isinstance(item, dict):
            for key, child in reversed(item.items()):
                key_text = str(key)
                key_reason = unstorable_reason(key_text) if isinstance(key, str) else None
                if key_reason is not None:
                    return _found((link, _printable_key(key_text)), path, key_reason)
                stack.append(((link, key_text), child))
        elif isinstance(item, list | tuple):
            stack.extend(((link, i), item[i]) for i in range(len(item) - 1, -1, -1))
        if reason is not None:
            return _found(link, path, reason)
    return None


def _printable_key(key: str) -> str:
    return _UNSTORABLE.sub(REPLACEMENT, key)


def scrub[T](value: T) -> tuple[T, bool]:
    """``value`` with NUL and lone surrogates replaced by U+FFFD in every string (keys too),
    and whether anything was replaced. Unchanged parts are returned as they are (no copy)."""
    result, changed = _scrub(value)
    return result, changed


def _scrub(value: Any) -> tuple[Any, bool]:
    # Recursion is bounded by the parse that produced the value (boundedjson's depth limit).
    if isinstance(value, str):
        if unstorable_reason(value) is None:
            return value, False
        return _UNSTORABLE.sub(REPLACEMENT, value), True
    if isinstance(value, dict):
        changed = False
        out: dict[Any, Any] = {}
        for key, child in value.items():
            new_key, key_changed = _scrub(key)
            new_child, child_changed = _scrub(child)
            changed = changed or key_changed or child_changed
            out[new_key] = new_child
        return (out, True) if changed else (value, False)
    if isinstance(value, list):
        items = [_scrub(child) for child in value]
        if any(c for _, c in items):
            return [v for v, _ in items], True
        return value, False
    return value, False


def _storable_text(text: str) -> str:
    reason = unstorable_reason(text)
    if reason is not None:
        raise ValueError(f"text {reason}")
    return text


PgText = Annotated[str, AfterValidator(_storable_text)]
"""A string PostgreSQL can store: NUL or a lone surrogate is a validation error."""
PgBigInt = Annotated[int, Field(ge=BIGINT_MIN, le=BIGINT_MAX)]
PgInt = Annotated[int, Field(ge=INT4_MIN, le=INT4_MAX)]
PgSmallInt = Annotated[int, Field(ge=SMALLINT_MIN, le=SMALLINT_MAX)]
