"""Send limits as pure rules (05-DELIVERY-SEMANTICS §11, 04-API-SPEC §1.6): the sender's rate
(AB-5003), the recipient's backlog (AB-5004) and the tenant stream's size (AB-5005).

- **Rate**: a token bucket per sending agent whose capacity and refill are both
  ``publish_per_minute`` per minute, so a quiet sender may burst up to the whole minute's worth.
  A refused send takes no token and learns when the next one is there.
- **Backlog**: the recipient's pending messages (JetStream ``num_pending + num_ack_pending``)
  must be below ``pending_per_agent``.
- **Stream**: the bytes the tenant stream holds must be below ``stream_bytes``; JetStream itself
  refuses a publish that would not fit (the row then waits for the reconciler, 05 §12.1).

Nothing here reads a clock or the network; ``agentbus.gateway.send_limits`` feeds these rules.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = [
    "Bucket",
    "Taken",
    "backlog_full",
    "refill",
    "retry_after_header",
    "stream_full",
    "take",
]


@dataclass(frozen=True)
class Bucket:
    """Tokens left at monotonic time ``at`` (seconds)."""

    tokens: float
    at: float


@dataclass(frozen=True)
class Taken:
    """The bucket after a try; ``retry_after_s`` is None when a token was taken."""

    bucket: Bucket
    retry_after_s: float | None

    @property
    def allowed(self) -> bool:
        return self.retry_after_s is None


def refill(bucket: Bucket | None, now: float, per_minute: int) -> Bucket:
    """The bucket at ``now``: full when new, else topped up at ``per_minute / 60`` tokens per
    second up to ``per_minute``. A clock that went backwards adds nothing."""
    if bucket is None:
        return Bucket(float(per_minute), now)
    elapsed = max(0.0, now - bucket.at)
    tokens = min(float(per_minute), bucket.tokens + elapsed * per_minute / 60.0)
    return Bucket(tokens, max(now, bucket.at))


def take(bucket: Bucket | None, now: float, per_minute: int) -> Taken:
    """Take one token, or say how long until one is there (the bucket is left as it was)."""
    current = refill(bucket, now, per_minute)
    if current.tokens >= 1.0:
        return Taken(Bucket(current.tokens - 1.0, current.at), None)
    if per_minute <= 0:
        return Taken(current, 60.0)
    return Taken(current, (1.0 - current.tokens) * 60.0 / per_minute)


def backlog_full(pending: int, limit: int) -> bool:
    return pending >= limit


def stream_full(stored_bytes: int, limit: int) -> bool:
    return stored_bytes >= limit


def retry_after_header(seconds: float) -> int:
    """``Retry-After`` is whole seconds, never below the real wait and never 0."""
    return max(1, math.ceil(seconds))
