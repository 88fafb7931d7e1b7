"""orjson where a server encodes a lot of JSON on its hot paths: row documents and JSON
columns written in bulk, and the sorted encodings signatures are checked over. ``dumps``
falls back to the standard encoder for what orjson refuses (integers beyond 64 bits, which
``json.loads`` accepts from a client)."""

from __future__ import annotations

import json
from typing import Any

import orjson


def dumps(value: Any) -> bytes | str:
    """JSON of ``value`` for PostgreSQL: orjson, or the standard encoder when orjson refuses.
    Non-finite floats, which are not JSON (``json.loads`` accepts them), become null."""
    try:
        return orjson.dumps(value)
    except TypeError:
        return json.dumps(value)


def canonical_candidate(value: Any) -> bytes:
    """Usually ``wirekit.canonical_json`` of a parsed value (sorted keys, no spaces, UTF-8),
    about ten times faster, but not always: orjson writes some floats differently (``1.5e-7``
    for ``1.5e-07``) and refuses integers beyond 64 bits. Only for a first try that the exact
    encoding backs up, as z4j's frame verifier does."""
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
