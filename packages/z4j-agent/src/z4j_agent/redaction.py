"""Redaction of task arguments, results and tracebacks before they leave a process.

``redact`` walks dicts, lists, tuples and sets and returns new, JSON-safe objects: values under
sensitive keys become ``[redacted]`` whatever their type, secret-shaped substrings of every string
are masked (see ``textsecrets``), and anything that is not JSON becomes its ``repr``, truncated.
Depth, item count and string length are bounded, so a huge or cyclic argument cannot blow up an
event. The function is idempotent: the brain runs it again on receipt and changes nothing.

Pure functions without dependencies, imported by the agent and by the brain.
"""

from __future__ import annotations

import functools
import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import islice
from typing import Any

from z4j_agent.textsecrets import (
    REDACTED,
    mask_text,
    may_hold_secret,
    normalize_keys,
    secret_spans,
)
from z4j_agent.textsecrets import is_sensitive_key as _sensitive

__all__ = [
    "REDACTED",
    "TRUNCATED",
    "RedactionLimits",
    "find_secrets",
    "is_redacted_json",
    "is_sensitive_key",
    "normalize_keys",
    "redact",
    "redact_text",
    "redacted_json_flags",
]

TRUNCATED = " ...[truncated]"
TOO_DEEP = "[truncated: nested too deeply]"
MORE_KEY = "[truncated]"


@dataclass(frozen=True)
class RedactionLimits:
    max_depth: int = 12
    max_items: int = 200
    max_string: int = 16 * 1024
    max_repr: int = 2048
    max_key: int = 256


DEFAULT_LIMITS = RedactionLimits()


def redact_text(text: str, extra_keys: Iterable[str] = (), max_length: int | None = None) -> str:
    """Mask the secrets of ``text``; with ``max_length`` the result is at most that long."""
    return _text(text, normalize_keys(extra_keys), max_length)


def _text(text: str, extra: tuple[str, ...], limit: int | None) -> str:
    if limit is None:
        return mask_text(text, extra)
    # Masking a very long string costs time for text that truncation drops anyway.
    masked = mask_text(text[: limit * 4], extra)
    if len(masked) <= limit and len(text) <= limit * 4:
        return masked
    cut = max(0, limit - len(TRUNCATED) - 32)
    while True:
        # Masking the cut text again hides a secret the cut split; the result is a fixpoint of
        # ``mask_text`` within the limit, which is what makes ``redact`` idempotent.
        result = mask_text(masked[:cut] + TRUNCATED, extra)
        if len(result) <= limit or cut == 0:
            return result[:limit] if cut == 0 else result
        cut = max(0, cut - 64)


def is_sensitive_key(key: str, extra_keys: Iterable[str] = ()) -> bool:
    """Whether values under ``key`` are masked: ``Password``, ``api-key``, ``X-Auth-Token``..."""
    return _sensitive(key, normalize_keys(extra_keys))


def redact(
    value: Any, extra_keys: Iterable[str] = (), limits: RedactionLimits = DEFAULT_LIMITS
) -> Any:
    """A redacted, JSON-safe copy of ``value``; ``extra_keys`` adds sensitive key names."""
    return _walk(value, 0, normalize_keys(extra_keys), limits)


def _walk(value: Any, depth: int, extra: tuple[str, ...], limits: RedactionLimits) -> Any:
    if value is None or type(value) is bool:
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return int(value)
    if isinstance(value, float):
        return float(value) if math.isfinite(value) else repr(float(value))
    if isinstance(value, str):
        return _text(str.__str__(value), extra, limits.max_string)
    if isinstance(value, Mapping | list | tuple | set | frozenset) and depth >= limits.max_depth:
        return TOO_DEEP
    if isinstance(value, Mapping):
        return _mapping(value, depth, extra, limits)
    if isinstance(value, list | tuple | set | frozenset):
        items = list(islice(value, limits.max_items + 1))
        out = [_walk(item, depth + 1, extra, limits) for item in items[: limits.max_items]]
        if len(value) > limits.max_items:
            out[-1] = f"[truncated: {len(value) - limits.max_items + 1} more items]"
        return out
    return _text(_safe_repr(value), extra, limits.max_repr)


def _mapping(
    value: Mapping[Any, Any], depth: int, extra: tuple[str, ...], limits: RedactionLimits
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    items = list(islice(value.items(), limits.max_items + 1))
    keep = limits.max_items if len(items) <= limits.max_items else limits.max_items - 1
    for key, item in items[:keep]:
        name = key if isinstance(key, str) else _key_repr(key)
        name, sensitive = _key(str.__str__(name), extra, limits.max_key)
        out[name] = REDACTED if sensitive else _walk(item, depth + 1, extra, limits)
    if len(items) > limits.max_items:
        out[MORE_KEY] = f"{len(value) - keep} more items"
    return out


@functools.lru_cache(maxsize=8192)
def _key(name: str, extra: tuple[str, ...], limit: int) -> tuple[str, bool]:
    # The same few keys recur in every event; masking and classifying each once is enough.
    masked = _text(name, extra, limit)
    return masked, _sensitive(masked, extra)


def _key_repr(key: Any) -> str:
    if key is None or isinstance(key, bool | int | float):
        return str(key)
    return _safe_repr(key)


def _safe_repr(value: Any) -> str:
    try:
        return repr(value)
    except Exception:  # a broken __repr__ must not break the task's event
        return f"<unrepresentable {type(value).__name__}>"


# Separators no JSON-encoded string can contain (control characters are always escaped), so in
# such an encoding a key is a string right after "{" or _ITEM_SEP and right before _KEY_SEP.
# Each match is (key, the encoded value if it is exactly REDACTED, else ""). Starting only after
# "{" or _ITEM_SEP, with the string's body as runs between escapes, the search spends its time in
# keys rather than stepping through every character of every value.
_ITEM_SEP, _KEY_SEP = "\x01", "\x02"
_ENCODED_KEY = re.compile(
    r'[{\x01]"([^"\\]*+(?:\\.[^"\\]*+)*+)"\x02(' + re.escape(json.dumps(REDACTED)) + ")?"
)
_ENCODER = json.JSONEncoder(
    separators=(_ITEM_SEP, _KEY_SEP),
    ensure_ascii=True,  # non-ASCII keys show a backslash and take the slow path
    allow_nan=False,
    check_circular=False,
)


def is_redacted_json(value: Any, limits: RedactionLimits = DEFAULT_LIMITS) -> bool:
    """Whether ``redact(value, (), limits)`` would equal ``value``, judged from one encoding.

    For values fresh from ``json.loads``, such as what an agent sent, where most data has been
    redacted already: one encoding and one search in C stand in for the walk. The answer errs
    only towards False (then the caller redacts): a value whose encoding holds no secret
    candidate, no long key, no sensitive key but with the value REDACTED, and is too short,
    shallow and small for any limit to apply is returned by ``redact`` unchanged.

    ``value`` must hold JSON types only: the encoder would turn a tuple or an int key into
    something else than ``redact`` makes of them.
    """
    return redacted_json_flags((value,), limits)[0]


# Joins the encodings of a batch; any character would do, since the searches only look for
# something and a joined text holds everything its parts hold.
_BATCH_SEP = "\x03"


def redacted_json_flags(
    values: Sequence[Any], limits: RedactionLimits = DEFAULT_LIMITS
) -> list[bool]:
    """``[is_redacted_json(v, limits) for v in values]``, with the searches done once.

    The size bounds are checked on each value's encoding; the secret search and the keys are
    judged on the encodings joined: when the whole holds nothing, no part does. Only a batch
    where something turns up is judged value by value.
    """
    texts: list[str | None] = []
    for value in values:
        try:
            text = _ENCODER.encode(value)
        except (TypeError, ValueError, RecursionError):
            texts.append(None)
            continue
        too_big = (
            len(text) > limits.max_string
            or text.count(_ITEM_SEP) >= limits.max_items
            or text.count("[") + text.count("{") >= limits.max_depth
        )
        texts.append(None if too_big else text)
    present = [t for t in texts if t is not None]
    if _holds_nothing(_BATCH_SEP.join(present), limits.max_key):
        return [t is not None for t in texts]
    if len(present) == 1:  # the whole was that one text: judged already
        return [False] * len(texts)
    return [t is not None and _holds_nothing(t, limits.max_key) for t in texts]


def _holds_nothing(text: str, max_key: int) -> bool:
    return not may_hold_secret(text) and _keys_kept(frozenset(_ENCODED_KEY.findall(text)), max_key)


@functools.lru_cache(maxsize=4096)
def _keys_kept(keys: frozenset[tuple[str, str]], limit: int) -> bool:
    # Events of one kind share their keys, so whole key sets recur and are judged once. A
    # sensitive key passes only when its value already reads REDACTED.
    return not any(
        "\\" in key or len(key) > limit or (not masked and _sensitive(key, ()))
        for key, masked in keys
    )


def find_secrets(value: Any, extra_keys: Iterable[str] = ()) -> list[str]:
    """Secrets still present in ``value``: unmasked values of sensitive keys and secret-shaped
    substrings. Empty for anything ``redact`` returned."""
    extra = normalize_keys(extra_keys)
    found: list[str] = []
    stack: list[Any] = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            found.extend(secret_spans(item, extra))
        elif isinstance(item, Mapping):
            for key, sub in item.items():
                if isinstance(key, str):
                    found.extend(secret_spans(key, extra))
                    if _sensitive(key, extra) and sub != REDACTED:
                        found.append(_safe_repr(sub))
                        continue
                stack.append(sub)
        elif isinstance(item, list | tuple | set | frozenset):
            stack.extend(item)
    return found
