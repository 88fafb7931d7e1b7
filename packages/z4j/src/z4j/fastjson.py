"""orjson where the brain encodes a lot of JSON: the ingest path's row documents and the
frames whose signatures it checks. Both fall back to the standard encoder for what orjson
refuses (integers beyond 64 bits, which ``json.loads`` accepts from an agent)."""

from __future__ import annotations

import json
from typing import Any

import orjson


def dumps(value: Any) -> bytes | str:
    """JSON of ``value`` for PostgreSQL: orjson, or the standard encoder when orjson refuses."""
    try:
        return orjson.dumps(value)
    except TypeError:
        return json.dumps(value)


def canonical_candidate(value: Any) -> bytes:
    """Usually the canonical JSON of a parsed frame (sorted keys, no spaces, UTF-8), about ten
    times faster; the verifier falls back to the exact encoder whenever its HMAC does not
    match (orjson writes some floats differently, e.g. ``1e16`` for ``1e+16``)."""
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
