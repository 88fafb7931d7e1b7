"""Identifiers: UUIDv7 and their prefixed text form (conventions §1).

The gateway mints most ids; the sender's sidecar mints ``msg_`` and ``cnv_``. wirekit carries
no UUIDv7 source and the sidecar must not import the server kernel, so a small one lives here,
built to RFC 9562 §6.2 method 2: ``rand_a`` and ``rand_b`` form one 74-bit counter that is
reseeded at random on every new millisecond and advanced by a random step inside one, so ids of
one process strictly increase. The millisecond is ``clock.server_ms()``: local time corrected
by the offset the sidecar learns from the gateway's ``Date`` headers.
"""

from __future__ import annotations

import os
import re
import secrets
import threading
import uuid
from datetime import datetime

from agentbus_sidecar.clock import from_ms, server_ms

__all__ = [
    "PREFIXES",
    "id_time",
    "new_id",
    "parse_id",
    "request_msg_id_for",
    "restart_ids",
    "task_id_for",
    "uuid7",
]

PREFIXES = frozenset(
    {"ten", "ws", "usr", "agt", "tok", "msg", "cnv", "tsk", "rcp", "pol"}
    | {"grt", "blb", "key", "inv", "trn", "aud", "csn", "sub", "evt", "usg"}
)
_ID = re.compile(r"^([a-z]+)_([0-9a-f]{32})$")
_COUNTER_BITS = 74


class _Uuid7Source:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last_ms = -1
        self._counter = 0

    def reset(self) -> None:
        with self._lock:
            self._last_ms, self._counter = -1, 0

    def __call__(self) -> uuid.UUID:
        with self._lock:
            now = server_ms()
            if now > self._last_ms:
                self._last_ms, self._counter = now, secrets.randbits(_COUNTER_BITS - 1)
            else:
                # Same millisecond, or the (corrected) clock stepped back: keep counting upward.
                self._counter += 1 + secrets.randbits(24)
                if self._counter >> _COUNTER_BITS:
                    self._last_ms += 1
                    self._counter = secrets.randbits(_COUNTER_BITS - 1)
            ms, counter = self._last_ms, self._counter
        rand_a, rand_b = counter >> 62, counter & ((1 << 62) - 1)
        return uuid.UUID(int=(ms << 80) | (7 << 76) | (rand_a << 64) | (0b10 << 62) | rand_b)


_source = _Uuid7Source()


def restart_ids() -> None:
    """Forget the time of the last id: the next one follows the corrected clock again, even if
    that went back (a forked child; a test that moved the clock ahead and back)."""
    _source.reset()


os.register_at_fork(after_in_child=restart_ids)


def uuid7() -> uuid.UUID:
    return _source()


def new_id(prefix: str) -> str:
    """A fresh prefixed id, e.g. ``msg_01a12f72923b7c4d9e8f0a1b2c3d4e5f``."""
    if prefix not in PREFIXES:
        raise ValueError(f"unknown id prefix {prefix!r}")
    return f"{prefix}_{uuid7().hex}"


def parse_id(text: str, prefix: str, *, client_minted: bool = False) -> uuid.UUID:
    """Strictly parse a prefixed id; ``client_minted`` also demands version 7 and RFC variant."""
    match = _ID.match(text) if isinstance(text, str) else None
    if match is None or match.group(1) != prefix:
        raise ValueError(f"{text!r} is not a {prefix}_ id")
    value = uuid.UUID(hex=match.group(2))
    if client_minted and (value.version != 7 or value.variant != uuid.RFC_4122):
        raise ValueError(f"{text!r} is not a UUIDv7 {prefix}_ id")
    return value


def id_time(text: str) -> datetime:
    """The creation time embedded in a prefixed UUIDv7 id."""
    match = _ID.match(text)
    if match is None:
        raise ValueError(f"{text!r} is not a prefixed id")
    return from_ms(int(match.group(2)[:12], 16))


def task_id_for(request_msg_id: str) -> str:
    """``tsk_`` id of the task a request creates: same uuid, other prefix (conventions §1.4)."""
    return "tsk_" + parse_id(request_msg_id, "msg").hex


def request_msg_id_for(task_id: str) -> str:
    """The ``msg_`` id of the request that created ``task_id``."""
    return "msg_" + parse_id(task_id, "tsk").hex
