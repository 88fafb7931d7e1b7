"""Rate and send limits as pure rules (05-DELIVERY-SEMANTICS §11, 04-API-SPEC §1.6): token
buckets for the sender's rate (AB-5003) and the request rates (AB-5008), the recipient's
backlog (AB-5004) and the tenant stream's size (AB-5005).

- **Rate**: a token bucket that refills at ``per_minute`` a minute up to its ``capacity`` (the
  burst; ``per_minute`` unless given). A sender's capacity is its whole ``publish_per_minute``,
  so a quiet sender may burst up to the minute's worth. A refused try takes no token and learns
  when the next one is there; ``full_in_s`` is how long until the bucket is full again (the
  ``RateLimit-Reset`` of a response).
- **Backlog**: the recipient's pending messages (JetStream ``num_pending + num_ack_pending``)
  must be below ``pending_per_agent``.
- **Stream**: the bytes the tenant stream holds must be below ``stream_bytes``; JetStream itself
  refuses a publish that would not fit (the row then waits for the reconciler, 05 §12.1).

Nothing here reads a clock or the network; ``agentbus.gateway.actions.send_limits`` feeds
these rules.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = [
    "Bucket",
    "Taken",
    "backlog_full",
    "full_in_s",
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


def refill(
    bucket: Bucket | None, now: float, per_minute: int, capacity: int | None = None
) -> Bucket:
    """The bucket at ``now``: full when new, else topped up at ``per_minute / 60`` tokens per
    second up to ``capacity``. A clock that went backwards adds nothing."""
    top = float(per_minute if capacity is None else capacity)
    if bucket is None:
        return Bucket(top, now)
    elapsed = max(0.0, now - bucket.at)
    tokens = min(top, bucket.tokens + elapsed * per_minute / 60.0)
    return Bucket(tokens, max(now, bucket.at))


def take(bucket: Bucket | None, now: float, per_minute: int, capacity: int | None = None) -> Taken:
    """Take one token, or say how long until one is there (the bucket is left as it was)."""
    current = refill(bucket, now, per_minute, capacity)
    if current.tokens >= 1.0:
        return Taken(Bucket(current.tokens - 1.0, current.at), None)
    if per_minute <= 0:
        return Taken(current, 60.0)
    return Taken(current, (1.0 - current.tokens) * 60.0 / per_minute)


def give_back(
    bucket: Bucket, now: float, per_minute: int, tokens: int, capacity: int | None = None
) -> Bucket:
    """The bucket at ``now`` with ``tokens`` taken tokens returned, up to ``capacity``."""
    top = float(per_minute if capacity is None else capacity)
    current = refill(bucket, now, per_minute, capacity)
    return Bucket(min(top, current.tokens + tokens), current.at)


def full_in_s(bucket: Bucket, per_minute: int, capacity: int | None = None) -> float:
    """Seconds from ``bucket.at`` until the bucket is full again (0 when it is)."""
    top = float(per_minute if capacity is None else capacity)
    if per_minute <= 0:
        return 0.0 if bucket.tokens >= top else 60.0
    return max(0.0, (top - bucket.tokens) * 60.0 / per_minute)


def backlog_full(pending: int, limit: int) -> bool:
    return pending >= limit


def stream_full(stored_bytes: int, limit: int) -> bool:
    return stored_bytes >= limit


def retry_after_header(seconds: float) -> int:
    """``Retry-After`` is whole seconds, never below the real wait and never 0."""
    return max(1, math.ceil(seconds))
