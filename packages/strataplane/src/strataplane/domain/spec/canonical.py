"""Canonical TOML (spec-format.md §7): parse a submitted file, reject what cannot be stored,
and re-emit it deterministically so that equal values have equal bytes and equal blob hashes.

``parse`` turns bytes into a value (SP-1003 … SP-1005 as ``SpecError``), ``canonical_bytes``
writes a value in the §7.2 layout, ``canonicalize`` does both and reports dropped comments
(SP-1006), ``blob_hash`` is SHA-256 of canonical bytes. Only the standard library is used.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import math
import re
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from strataplane.domain.spec.diagnostics import Collector, Diagnostic, SpecError, at

__all__ = [
    "MAX_BYTES",
    "MAX_DEPTH",
    "Canonical",
    "Table",
    "Value",
    "blob_hash",
    "canonical_bytes",
    "canonicalize",
    "has_comments",
    "parse",
]

type Value = str | int | float | bool | list[Value] | dict[str, Value]
type Table = dict[str, Value]

MAX_BYTES = 1_048_576
MAX_DEPTH = 32
_BOM = b"\xef\xbb\xbf"
_INT64 = (-(2**63), 2**63 - 1)
_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_ESCAPES = {i: f"\\u{i:04X}" for i in [*range(0x20), 0x7F]}
_ESCAPES.update({0x22: '\\"', 0x5C: "\\\\", 0x08: "\\b", 0x09: "\\t", 0x0A: "\\n"})
_ESCAPES.update({0x0C: "\\f", 0x0D: "\\r"})
_ESCAPES_ML = {**_ESCAPES, 0x0A: "\n"}


@dataclass(frozen=True, slots=True)
class Canonical:
    """A canonicalized file: its bytes, their hash, the parsed value and SP-1006 if any."""

    content: bytes
    hash: bytes
    value: Table
    notices: tuple[Diagnostic, ...]


def blob_hash(content: bytes) -> bytes:
    """``spec_blob.hash``: SHA-256 of the canonical bytes (32 raw bytes)."""
    return hashlib.sha256(content).digest()


def parse(data: bytes) -> Table:
    """Parse a submitted file; raise ``SpecError`` with SP-1003, SP-1004 or SP-1005."""
    return _parse_text(_decode(data))


def canonicalize(data: bytes, path: str | None = None) -> Canonical:
    """Parse and re-emit ``data``; the notices carry SP-1006 when comments were dropped."""
    text = _decode(data, path)
    value = _parse_text(text, path)
    content = canonical_bytes(value, path)
    notices: tuple[Diagnostic, ...] = ()
    if has_comments(text):
        notices = (Diagnostic("SP-1006", path, None, "comments were dropped; use description"),)
    return Canonical(content, blob_hash(content), value, notices)


def canonical_bytes(value: Mapping[str, object], path: str | None = None) -> bytes:
    """The canonical bytes of a document; ``SpecError`` for values that cannot be stored."""
    collector = Collector(path)
    _check(value, None, 0, collector)
    if collector.diagnostics:
        raise SpecError(collector.diagnostics)
    lines: list[str] = []
    _write_table(lines, "", value, element=False)
    content = ("\n".join(lines) + "\n").encode("utf-8") if lines else b""
    if len(content) > MAX_BYTES:
        msg = f"canonical form is {len(content)} bytes, more than {MAX_BYTES}"
        raise SpecError([Diagnostic("SP-1005", path, None, msg)])
    return content


def _decode(data: bytes, path: str | None = None) -> str:
    if data.startswith(_BOM):
        data = data[len(_BOM) :]
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        before = data[: exc.start].decode("utf-8")
        line = before.count("\n") + 1
        column = len(before) - (before.rfind("\n") + 1) + 1
        msg = f"content is not UTF-8 (at line {line}, column {column})"
        raise SpecError([Diagnostic("SP-1003", path, None, msg)]) from None


def _parse_text(text: str, path: str | None = None) -> Table:
    try:
        value = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise SpecError([Diagnostic("SP-1003", path, None, f"not TOML 1.0: {exc}")]) from None
    except RecursionError:
        msg = f"tables and arrays nested deeper than {MAX_DEPTH}"
        raise SpecError([Diagnostic("SP-1005", path, None, msg)]) from None
    collector = Collector(path)
    _check(value, None, 0, collector)
    if collector.diagnostics:
        raise SpecError(collector.diagnostics)
    return value


def _check(value: object, pointer: str | None, depth: int, out: Collector) -> None:
    if isinstance(value, Mapping | list):
        if depth > MAX_DEPTH:
            out.add("SP-1005", pointer, f"tables and arrays nested deeper than {MAX_DEPTH}")
            return
        items = value.items() if isinstance(value, Mapping) else enumerate(value)
        for key, item in items:
            if isinstance(key, str) and _CONTROL.search(key):
                out.add("SP-1004", at(pointer, key), "control character in a key")
            elif not isinstance(key, str | int):
                raise TypeError(f"key {key!r} is not a string")
            _check(item, at(pointer, key), depth + 1, out)
    elif isinstance(value, bool):
        pass
    elif isinstance(value, int):
        if not _INT64[0] <= value <= _INT64[1]:
            out.add("SP-1004", pointer, "integer outside 64 bits")
    elif isinstance(value, float):
        if not math.isfinite(value):
            out.add("SP-1004", pointer, "NaN and infinity are not supported")
    elif isinstance(value, str):
        if "\x00" in value:
            out.add("SP-1004", pointer, "the character U+0000 cannot be stored")
    elif isinstance(value, dt.date | dt.time):
        out.add("SP-1004", pointer, "dates and times are not used in the spec")
    else:
        raise TypeError(f"{type(value).__name__} at {pointer} is not a TOML value")


def _is_section(value: object) -> bool:
    if isinstance(value, Mapping):
        return True
    return isinstance(value, list) and bool(value) and all(isinstance(v, Mapping) for v in value)


def _write_table(
    lines: list[str], path: str, table: Mapping[str, object], *, element: bool
) -> None:
    keys = sorted(table)
    plain = [k for k in keys if not _is_section(table[k])]
    sections = [k for k in keys if _is_section(table[k])]
    if element or (path and (plain or not sections)):
        if lines:
            lines.append("")
        lines.append(f"[[{path}]]" if element else f"[{path}]")
    for key in plain:
        lines.append(f"{_key(key)} = {_value(table[key], top=True)}")
    for key in sections:
        sub = f"{path}.{_key(key)}" if path else _key(key)
        item = table[key]
        if isinstance(item, Mapping):
            _write_table(lines, sub, item, element=False)
        else:
            assert isinstance(item, list)  # _is_section: a non-empty list of tables
            for child in item:
                _write_table(lines, sub, child, element=True)


def _key(key: str) -> str:
    return key if _BARE_KEY.fullmatch(key) else f'"{key.translate(_ESCAPES)}"'


def _value(value: object, *, top: bool = False) -> str:
    if isinstance(value, str):
        if top and "\n" in value:
            return f'"""\n{value.translate(_ESCAPES_ML)}"""'
        return f'"{value.translate(_ESCAPES)}"'
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return _float(value)
    if isinstance(value, Mapping):
        if not value:
            return "{}"
        pairs = ", ".join(f"{_key(k)} = {_value(value[k])}" for k in sorted(value))
        return "{ " + pairs + " }"
    assert isinstance(value, Sequence)  # _check admitted only TOML values
    return "[" + ", ".join(_value(v) for v in value) + "]"


def _float(value: float) -> str:
    text = repr(value)
    if "e" not in text:
        return text
    mantissa, exponent = text.split("e")
    sign = "-" if exponent.startswith("-") else ""
    return f"{mantissa}e{sign}{exponent.lstrip('+-').lstrip('0') or '0'}"


def has_comments(text: str) -> bool:
    """Whether TOML ``text`` (already known to parse) contains a comment."""
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch == "#":
            return True
        if ch in "\"'":
            i = _skip_string(text, i, ch)
        else:
            i += 1
    return False


def _skip_string(text: str, i: int, quote: str) -> int:
    triple = text.startswith(quote * 3, i)
    i += 3 if triple else 1
    while i < len(text):
        if quote == '"' and text[i] == "\\":
            i += 2
        elif triple and text.startswith(quote * 3, i):
            end = i
            while end < len(text) and text[end] == quote and end - i < 5:
                end += 1  # up to two quotes just inside the closing delimiter are content
            return end
        elif not triple and text[i] == quote:
            return i + 1
        else:
            i += 1
    return i
