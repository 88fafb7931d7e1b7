"""Canonical JSON: the one byte form of a JSON value that both ends of a wire hash or sign.

Two parties that hold equal values must produce identical bytes, so the encoding is fixed:
object keys sorted by Unicode code point, no insignificant whitespace, UTF-8 without ``\\u``
escapes for non-ASCII text, and no NaN or Infinity (they are not JSON and have no portable
form). Only JSON types are accepted; anything else is a programming error rather than
something to stringify.
"""

from __future__ import annotations

import hashlib
import json
import math
from typing import Any

__all__ = ["canonical_hash", "canonical_json", "canonical_json_parsed"]


def _check(value: Any, path: str) -> None:
    # Validate up front instead of relying on json.dumps: it silently coerces int/float/bool/None
    # keys to strings and accepts str/int subclasses such as enums, which would let two
    # different values share one canonical form.
    if value is None or type(value) in (str, bool, int):
        return
    if type(value) is float:
        if not math.isfinite(value):
            raise ValueError(f"non-finite float at {path} has no JSON form")
        return
    if type(value) in (list, tuple):
        for index, item in enumerate(value):
            _check(item, f"{path}[{index}]")
        return
    if type(value) is dict:
        for key, item in value.items():
            if type(key) is not str:
                raise TypeError(f"object key {key!r} at {path} is not a str")
            _check(item, f"{path}.{key}")
        return
    raise TypeError(f"value of type {type(value).__name__} at {path} is not a JSON type")


def canonical_json(obj: Any) -> bytes:
    """Encode ``obj`` as canonical JSON bytes.

    Raises TypeError for values that are not dict (str keys), list, tuple, str, int, float,
    bool or None, and ValueError for NaN or an infinity.
    """
    _check(obj, "$")
    return _encode(obj)


def canonical_json_parsed(obj: Any) -> bytes:
    """``canonical_json`` of a value fresh from ``json.loads``, for verifying what arrived.

    Such a value can only hold JSON types (str keys, no subclasses), so the type walk is
    skipped; NaN and the infinities, which ``json.loads`` does accept, are still refused.
    """
    return _encode(obj)


def _encode(obj: Any) -> bytes:
    text = json.dumps(
        obj,
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
        allow_nan=False,
    )
    # surrogatepass is deliberately not used: a lone surrogate is not valid Unicode text and
    # should fail loudly rather than produce bytes another decoder rejects.
    return text.encode("utf-8")


def canonical_hash(obj: Any) -> str:
    """Return the lowercase hex SHA-256 of ``canonical_json(obj)``."""
    return hashlib.sha256(canonical_json(obj)).hexdigest()
