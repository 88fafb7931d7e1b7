"""JSON parsing with bounds checked before the parser runs: size and nesting depth.

``json.loads`` recurses once per level of nesting, so a document nested 100,000 deep raises
``RecursionError`` (or worse, in a thread with a small stack) instead of a clean refusal. Here
the depth is measured first by one linear scan that skips string contents; a document within
the bounds is then handed to ``json.loads`` as usual. Every failure is a :class:`JsonRefused`
with a ``reason`` fit to send back to the client.

The scan is skipped outright when the document holds fewer opening brackets than the depth
limit, which is the case of nearly every real request.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from platformkit.storable import BIGINT_MAX, BIGINT_MIN, unstorable_reason

__all__ = [
    "DEFAULT_MAX_DEPTH",
    "JsonRefused",
    "exceeds_depth",
    "loads",
    "loads_for_storage",
    "may_hold_unstorable",
    "nesting_depth",
]

DEFAULT_MAX_DEPTH = 64

# String tokens (contents skipped whole, escapes included), then everything but brackets.
_STRINGS = re.compile(rb'"(?:[^"\\]++|\\.)*+"')
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_NOT_QUOTES_OR_BRACKETS = bytes(b for b in range(256) if b not in b'"[]{}')
_ONE_KIND = bytes.maketrans(b"[{]}", b"(())")
_OPENERS = (b"[", b"{")
_UNSTORABLE_ESCAPE = re.compile(rb"\\u(?:0000|[dD][89a-fA-F])")
# For the screen: digits become 0, exponent letters e, signs s, everything else a space.
_NUMBER_SHAPES = bytes(
    48 if 48 <= b <= 57 else 101 if b in b"eE" else 115 if b in b"+-" else 32 for b in range(256)
)
_LONG_INTEGER = b"0" * 19  # 2**63 has 19 digits: any integer past bigint has at least as many
_LARGE_EXPONENTS = (b"0e000", b"0es000")  # a digit, then an exponent of 3 digits or more
_ENCODED_SURROGATE = re.compile(rb"\xed[\xa0-\xbf]")


class JsonRefused(ValueError):
    """A JSON document refused: too large, nested too deep, or not valid JSON."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def nesting_depth(data: bytes | str, *, limit: int | None = None) -> int:
    """The deepest nesting of arrays and objects in ``data`` (0 for a scalar).

    Brackets inside strings do not count. The strings are cut out and the brackets kept (both
    kinds as one, since nesting is by position), then each pass removes the innermost pairs,
    one level everywhere at once, all in C: the number of passes is the depth. With
    ``limit``, counting stops past it. Unbalanced brackets count as deep as they are many; the
    parser that follows refuses them.
    """
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data
    if b'\\"' in raw:  # an escaped quote: only the tokenizer knows where strings end
        brackets = _STRINGS.sub(b"", raw).translate(None, _NOT_BRACKETS)
    else:  # every quote opens or closes a string: outside them are the even parts
        quotes_and_brackets = raw.translate(None, _NOT_QUOTES_OR_BRACKETS)
        # Two quotes side by side enclose nothing (a string without brackets, or the gap
        # between two strings): dropping them leaves every other quote's parity as it was,
        # and most documents with only their brackets and a few quotes.
        quotes_and_brackets = quotes_and_brackets.replace(b'""', b"")
        brackets = b"".join(quotes_and_brackets.split(b'"')[::2])
    brackets = brackets.translate(_ONE_KIND)
    depth = 0
    while brackets:
        inner = brackets.replace(b"()", b"")
        if len(inner) == len(brackets):
            return depth + len(brackets)
        depth += 1
        brackets = inner
        if limit is not None and depth > limit:
            break
    return depth


def exceeds_depth(data: bytes | str, max_depth: int = DEFAULT_MAX_DEPTH) -> bool:
    """Whether ``data`` nests deeper than ``max_depth``, measured as :func:`loads` does
    (free when it holds fewer opening brackets than the limit)."""
    return _openers(data) > max_depth and nesting_depth(data, limit=max_depth) > max_depth


def may_hold_unstorable(data: bytes) -> bool:
    """Whether ``json.loads(data)`` might hold something PostgreSQL cannot store, found without
    parsing: False means it certainly holds none, whatever else is wrong with it.

    True for an escaped NUL or surrogate, a raw NUL byte (also the sign of a UTF-16 or UTF-32
    document), UTF-8 that is not valid or encodes a surrogate (``json.loads`` lets those
    through), a run of 19 digits (an integer that may be past bigint), an exponent of three
    digits (a float that may overflow) and ``NaN`` or ``Infinity``. Strings are not told from
    numbers, so a long digit run in a string is a false alarm: the caller parses and walks the
    value to be sure. About a fifth of the cost of ``json.loads`` on the same bytes
    (docs/platformkit/hostile-input.md).
    """
    if b"\\u" in data and _UNSTORABLE_ESCAPE.search(data) is not None:
        return True
    if b"\x00" in data or b"NaN" in data or b"Infinity" in data:
        return True
    if not data.isascii():
        if _ENCODED_SURROGATE.search(data) is not None:
            return True
        try:
            data.decode("utf-8")
        except UnicodeDecodeError:
            return True
    shapes = data.translate(_NUMBER_SHAPES)
    return _LONG_INTEGER in shapes or any(e in shapes for e in _LARGE_EXPONENTS)


def _openers(data: bytes | str) -> int:
    if isinstance(data, bytes):
        return sum(data.count(opener) for opener in _OPENERS)
    return data.count("[") + data.count("{")


def loads(
    data: bytes | bytearray | memoryview | str,
    *,
    max_depth: int = DEFAULT_MAX_DEPTH,
    max_bytes: int | None = None,
) -> Any:
    """Parse ``data`` as JSON, refusing it (:class:`JsonRefused`) when it is larger than
    ``max_bytes``, nested deeper than ``max_depth`` or not valid JSON (integers of more than
    the interpreter's 4,300 digits included)."""
    raw: bytes | str = bytes(data) if isinstance(data, bytearray | memoryview) else data
    return _parse(raw, max_depth, max_bytes)


def _parse(raw: bytes | str, max_depth: int, max_bytes: int | None, *hooks: Any) -> Any:
    if max_bytes is not None and len(raw) > max_bytes:
        raise JsonRefused(f"larger than {max_bytes} bytes")
    if exceeds_depth(raw, max_depth):
        raise JsonRefused(f"nested deeper than {max_depth} levels")
    try:
        if hooks:
            parse_int, parse_float, parse_constant = hooks
            return json.loads(
                raw, parse_int=parse_int, parse_float=parse_float, parse_constant=parse_constant
            )
        return json.loads(raw)
    except RecursionError as exc:  # cannot happen within the depth bound; never a 500
        raise JsonRefused(f"nested deeper than {max_depth} levels") from exc
    except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError, too many digits
        raise JsonRefused(f"not valid JSON: {_first_line(exc)}") from exc


def _first_line(exc: ValueError) -> str:
    message = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return message[:200]


def loads_for_storage(
    data: bytes | bytearray | memoryview | str,
    *,
    max_depth: int = DEFAULT_MAX_DEPTH,
    max_bytes: int | None = None,
) -> tuple[Any, bool]:
    """:func:`loads`, and whether the value may hold something PostgreSQL cannot store.

    False means it certainly holds nothing of the kind, so the caller can skip walking it with
    :func:`platformkit.storable.find_unstorable`: no escaped NUL or surrogate in the text (a
    raw one is not valid JSON), no integer outside bigint, no NaN, Infinity or overflowing
    float. The numbers are watched while the parser meets them, which costs far less than a
    walk of the value (docs/platformkit/hostile-input.md has the figures).
    """
    raw: bytes | str = bytes(data) if isinstance(data, bytearray | memoryview) else data
    suspect = False

    def parse_int(text: str) -> int:
        nonlocal suspect
        number = int(text)
        if not BIGINT_MIN <= number <= BIGINT_MAX:
            suspect = True
        return number

    def parse_float(text: str) -> float:
        nonlocal suspect
        number = float(text)
        if not math.isfinite(number):
            suspect = True
        return number

    def parse_constant(text: str) -> float:
        nonlocal suspect
        suspect = True
        return float(text)

    value = _parse(raw, max_depth, max_bytes, parse_int, parse_float, parse_constant)
    if not suspect:
        if isinstance(raw, str):
            suspect = "\\u" in raw or unstorable_reason(raw) is not None
        else:
            suspect = b"\\u" in raw and _UNSTORABLE_ESCAPE.search(raw) is not None
    return value, suspect
