"""Wire timestamps and the server-corrected clock.

Timestamps are RFC 3339, UTC, ``Z``, exactly three fractional digits (conventions §7). Every
time the sidecar writes, on the wire or in ``state.db``, has this one form, so text comparison
in SQLite orders the same way as time does.

The gateway judges minted ids and key proofs by its own clock, so those use ``server_now()``:
local time plus the offset learnt from the gateway's ``Date`` headers
(``meta.server_time_offset_ms``). Local bookkeeping (outbox schedule, retention) uses local time.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

__all__ = [
    "format_ts",
    "from_ms",
    "parse_ts",
    "server_ms",
    "server_now",
    "server_offset_ms",
    "set_server_offset_ms",
    "to_ms",
    "utcnow",
]

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_offset_ms = 0


def set_server_offset_ms(offset_ms: int) -> None:
    """Record ``server time - local time`` in milliseconds."""
    global _offset_ms
    _offset_ms = int(offset_ms)


def server_offset_ms() -> int:
    return _offset_ms


def server_ms() -> int:
    return time.time_ns() // 1_000_000 + _offset_ms


def server_now() -> datetime:
    return from_ms(server_ms())


def utcnow() -> datetime:
    return datetime.now(UTC)


def format_ts(moment: datetime) -> str:
    """``2026-10-12T09:30:00.123Z``; the microseconds are truncated, never rounded up."""
    if moment.tzinfo is None:
        raise ValueError("naive datetimes have no place on the wire")
    moment = moment.astimezone(UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def parse_ts(text: str) -> datetime:
    """Parse an RFC 3339 timestamp with an offset or ``Z`` into an aware UTC datetime."""
    moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    if moment.tzinfo is None:
        raise ValueError(f"timestamp {text!r} has no offset")
    return moment.astimezone(UTC)


def from_ms(ms: int) -> datetime:
    return _EPOCH + timedelta(milliseconds=ms)


def to_ms(moment: datetime) -> int:
    return (moment - _EPOCH) // timedelta(milliseconds=1)
