"""Text ids (00-CONVENTIONS.md §1): a table prefix, ``_``, and the UUID's 32 lowercase hex digits.

``tok_01a12f7bb9807e4f9a8b7c6d5e4f3a2b`` is the uuid ``01a12f7b-b980-7e4f-9a8b-7c6d5e4f3a2b`` of
``integration_tokens``. Parsing is strict: uppercase hex, hyphens, braces, a missing prefix or
the prefix of another table are refused, so an id can never be mistaken for another kind.
Callers map ``InvalidId`` to their error (AB-8001 in a body, AB-8002 in a path, AB-2008 for a
message id in an envelope).
"""

from __future__ import annotations

import re
import uuid

from platformkit.ids import uuid7

__all__ = [
    "PREFIXES",
    "InvalidId",
    "format_id",
    "new_id",
    "new_signing_kid",
    "parse_any_id",
    "parse_id",
]

PREFIXES = frozenset(
    {
        "ten",
        "ws",
        "usr",
        "agt",
        "tok",
        "msg",
        "cnv",
        "tsk",
        "rcp",
        "pol",
        "grt",
        "blb",
        "key",
        "inv",
        "trn",
        "aud",
        "csn",
        "sub",
        "evt",
        "usg",
    }
)
_TEXT_ID = re.compile(r"([a-z]+)_([0-9a-f]{32})")
_RFC_VARIANT = "89ab"


class InvalidId(ValueError):
    """Not a text id of the expected kind."""


def format_id(prefix: str, value: uuid.UUID) -> str:
    """``prefix`` + ``_`` + the 32 hex digits of ``value``."""
    if prefix not in PREFIXES:
        raise ValueError(f"unknown id prefix {prefix!r}")
    if not isinstance(value, uuid.UUID):
        raise TypeError("value must be a UUID")
    return f"{prefix}_{value.hex}"


def parse_any_id(text: str) -> tuple[str, uuid.UUID]:
    """Split a text id of any known prefix into (prefix, uuid)."""
    match = _TEXT_ID.fullmatch(text) if isinstance(text, str) else None
    if match is None or match.group(1) not in PREFIXES:
        raise InvalidId("not an id: expected <prefix>_<32 lowercase hex digits>")
    return match.group(1), uuid.UUID(hex=match.group(2))


def parse_id(prefix: str, text: str, *, require_v7: bool = False) -> uuid.UUID:
    """The uuid of ``text``, which must carry ``prefix``.

    ``require_v7`` is for ids minted by clients (``msg_``, ``cnv_``): version 7 with the RFC 9562
    variant (hex digit 13 is ``7``, hex digit 17 one of ``89ab``).
    """
    if prefix not in PREFIXES:
        raise ValueError(f"unknown id prefix {prefix!r}")
    found, value = parse_any_id(text)
    if found != prefix:
        raise InvalidId(f"expected a {prefix}_ id")
    digits = value.hex
    if require_v7 and (digits[12] != "7" or digits[16] not in _RFC_VARIANT):
        raise InvalidId(f"{prefix}_ ids must be UUIDv7")
    return value


def new_id(prefix: str) -> tuple[uuid.UUID, str]:
    """A fresh UUIDv7 and its text form."""
    value = uuid7()
    return value, format_id(prefix, value)


def new_signing_kid() -> str:
    """A ``signing_keys.kid``: ``sk_`` and 32 hex digits, opaque to everyone else."""
    return f"sk_{uuid7().hex}"
