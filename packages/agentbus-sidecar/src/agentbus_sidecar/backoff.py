"""Retry delays, pure functions of the attempt count (05-DELIVERY-SEMANTICS.md §3, §6.1).

Outbox retries start at 1 s and double up to 5 min. The delay is drawn from the upper half of
that window ("equal jitter"): it still grows with every failure, yet many sidecars that lost the
gateway at the same moment do not come back in lockstep. A ``Retry-After`` from the gateway is a
floor, never shortened by jitter.
"""

from __future__ import annotations

import random

__all__ = ["nak_delay_ms", "reconnect_delay_s", "retry_delay_s"]

FIRST_S = 1.0
MAX_S = 300.0
RECONNECT_MAX_S = 30.0
_system_random = random.SystemRandom()


def retry_delay_s(
    attempts: int, *, retry_after_s: float | None = None, rng: random.Random | None = None
) -> float:
    """Delay before the next try after ``attempts`` failed tries (``attempts >= 1``)."""
    window = min(FIRST_S * 2.0 ** max(attempts - 1, 0), MAX_S)
    delay = window / 2 + (rng or _system_random).uniform(0, window / 2)
    return max(delay, retry_after_s or 0.0)


def reconnect_delay_s(failures: int, *, rng: random.Random | None = None) -> float:
    """Backoff for the delivery long-poll after ``failures`` consecutive failures: 1 s to 30 s."""
    window = min(FIRST_S * 2.0 ** max(failures - 1, 0), RECONNECT_MAX_S)
    return window / 2 + (rng or _system_random).uniform(0, window / 2)


def nak_delay_ms(attempt: int) -> int:
    """Default nak delay for delivery ``attempt``: ``min(1000 * 2^(attempt-1), 300000)`` ms."""
    return int(min(1000 * 2 ** max(attempt - 1, 0), 300_000))
