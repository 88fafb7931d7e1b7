"""Application-generated identifiers: UUIDv7 (RFC 9562) that sort by creation time.

Layout of the 128 bits, most significant first::

    48 bits  unix time in milliseconds
     4 bits  version (0b0111)
    12 bits  rand_a  \\ together a 74-bit counter: seeded randomly on each new millisecond,
     2 bits  variant  |  then advanced by a small random step for every further id in the same
    62 bits  rand_b  /   millisecond (RFC 9562 section 6.2, method 2, "monotonic random")

The counter makes ids strictly increasing within a process even when many are made in one
millisecond or the wall clock steps backwards. The random seed and random steps keep ids from
two processes apart and keep the next id unguessable.
"""

from __future__ import annotations

import os
import secrets
import threading
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

__all__ = ["Uuid7Generator", "uuid7", "uuid7_time"]

_COUNTER_BITS = 74
_RAND_B_BITS = 62
_MAX_MS = (1 << 48) - 1
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


class Uuid7Generator:
    """Thread-safe, strictly monotonic UUIDv7 source.

    ``clock`` returns unix milliseconds; it is a parameter so tests can freeze or rewind time.
    """

    def __init__(self, clock: Callable[[], int] = _wall_clock_ms) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._last_ms = -1
        self._counter = 0

    def reset(self) -> None:
        """Forget the last id; the next one reseeds the counter (used after fork)."""
        with self._lock:
            self._last_ms = -1
            self._counter = 0

    def _seed(self) -> int:
        # Top bit cleared: leaves at least 2**73 of headroom for increments in one millisecond.
        return secrets.randbits(_COUNTER_BITS - 1)

    def __call__(self) -> uuid.UUID:
        with self._lock:
            now = self._clock()
            if now > self._last_ms:
                self._last_ms = now
                self._counter = self._seed()
            else:
                # Same millisecond, or the clock went backwards: keep the last timestamp and
                # step the counter so order still follows the order of calls.
                self._counter += 1 + secrets.randbits(32)
                if self._counter >> _COUNTER_BITS:
                    # Counter exhausted (practically unreachable): borrow the next millisecond
                    # rather than wrap, which would break ordering.
                    self._last_ms += 1
                    self._counter = self._seed()
            if self._last_ms > _MAX_MS:
                raise OverflowError("timestamp does not fit in 48 bits")
            ms, counter = self._last_ms, self._counter
        rand_a = counter >> _RAND_B_BITS
        rand_b = counter & ((1 << _RAND_B_BITS) - 1)
        value = (ms << 80) | (0x7 << 76) | (rand_a << 64) | (0b10 << 62) | rand_b
        return uuid.UUID(int=value)


_default = Uuid7Generator()
# A forked child would otherwise continue the parent's counter and could repeat its next ids.
os.register_at_fork(after_in_child=_default.reset)


def uuid7() -> uuid.UUID:
    """Return a new UUIDv7, greater than every one returned before in this process."""
    return _default()


def uuid7_time(u: uuid.UUID) -> datetime:
    """Return the creation time (UTC, millisecond precision) embedded in a UUIDv7.

    Raises ValueError for other UUID versions and for timestamps past year 9999, which 48 bits
    can hold but ``datetime`` cannot.
    """
    if u.version != 7:
        raise ValueError(f"{u} is not a version 7 UUID")
    try:
        return _EPOCH + timedelta(milliseconds=u.int >> 80)
    except OverflowError as exc:
        raise ValueError(f"{u} carries a timestamp beyond datetime's range") from exc
