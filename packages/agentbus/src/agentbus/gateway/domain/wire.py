"""Small wire forms of 00-CONVENTIONS.md: base64url without padding, millisecond timestamps,
the time inside a UUIDv7, and the digest of a payload."""

from __future__ import annotations

import base64
import hashlib
import re
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from wirekit import canonical_json_parsed

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_TIMESTAMP = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$")
_B64URL = re.compile(r"^[A-Za-z0-9_-]*$")


def b64url_encode(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def b64url_decode(text: str) -> bytes:
    """Strict: only the URL-safe alphabet, no padding; ValueError otherwise."""
    if not isinstance(text, str) or not _B64URL.match(text) or len(text) % 4 == 1:
        raise ValueError("not base64url without padding")
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def format_ts(moment: datetime) -> str:
    """``2026-10-12T09:30:00.123Z``: UTC, exactly three fractional digits (truncated)."""
    # fields, not strftime: several per message on the hot path
    m = moment if moment.tzinfo is UTC else moment.astimezone(UTC)
    return (
        f"{m.year:04d}-{m.month:02d}-{m.day:02d}T{m.hour:02d}:{m.minute:02d}:{m.second:02d}"
        f".{m.microsecond // 1000:03d}Z"
    )


def parse_ts(text: str) -> datetime:
    """An envelope timestamp, which must have exactly the signed form; ValueError otherwise."""
    if not isinstance(text, str) or not _TIMESTAMP.match(text):
        raise ValueError("timestamps are YYYY-MM-DDTHH:MM:SS.mmmZ")
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def truncate_ms(moment: datetime) -> datetime:
    return moment.replace(microsecond=moment.microsecond // 1000 * 1000)


def uuid7_time(value: uuid.UUID) -> datetime:
    """The millisecond timestamp in the first 48 bits of a UUIDv7."""
    return _EPOCH + timedelta(milliseconds=value.int >> 80)


ID_AHEAD = timedelta(minutes=5)
"""How far a message id's time may run ahead of the gateway's clock (AB-2009)."""


def accepted_since(msg_id: uuid.UUID) -> datetime:
    """The earliest ``accepted_at`` of the message ``msg_id``: an id is at most ``ID_AHEAD``
    ahead of the gateway's clock when accepted (conventions §1.3), so this lower bound lets a
    lookup by id prune partitions."""
    return uuid7_time(msg_id) - ID_AHEAD


def payload_digest(data: Any) -> tuple[bytes, bytes]:
    """``(canonical_json(data), its SHA-256)``: the stored plaintext and ``payload_sha256``.
    ``data`` is an envelope's, fresh from ``json.loads``: JSON types only, no type walk."""
    plain = canonical_json_parsed(data)
    return plain, hashlib.sha256(plain).digest()
