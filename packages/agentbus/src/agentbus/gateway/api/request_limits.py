"""The request rates of 04-API-SPEC §1.6 beside the send bucket (``send_limits``): each a token
bucket per gateway process, refused with AB-5008 (429, ``Retry-After``), and on every answer the
``RateLimit-Limit``, ``RateLimit-Remaining`` and ``RateLimit-Reset`` headers of the bucket the
request took from.

| bucket | keyed by | per minute | burst |
|---|---|---|---|
| ``AGENT``: reads, acks, polls and every other agent request but sends | agent | 3000 | 3000 |
| ``CREDENTIALS``: credential issue and refresh | agent | 30 | 30 |
| ``MANAGEMENT``: every request with an integration token but those below | token | 600 | 100 |
| ``REGISTRATION``: ``POST /v1/agents`` | token | 60 | 60 |

The authentication functions take the token (``auth``); a route names another bucket where the
table says so. The quota rides on the request's ASGI state until ``response_headers`` writes it
into the response. Decisions as for sends: per process, so several workers each allow the
full rate; the buckets of idle keys are dropped once there are ``MAX_KEYS`` of them.
"""

from __future__ import annotations

import math
import time
import uuid
from collections.abc import Callable, MutableMapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from starlette.requests import HTTPConnection

from agentbus.gateway.domain import limits
from agentbus.gateway.domain.errors import ApiRateLimited

__all__ = [
    "STATE_KEY",
    "Kind",
    "Quota",
    "RequestLimits",
    "note_quota",
    "quota_of",
    "retry_data",
]

MAX_KEYS = 100_000
STATE_KEY = "agentbus.ratelimit"


class Kind(StrEnum):
    AGENT = "agent"
    CREDENTIALS = "credentials"
    MANAGEMENT = "management"
    REGISTRATION = "registration"


RULES: dict[Kind, tuple[int, int]] = {  # per minute, burst
    Kind.AGENT: (3000, 3000),
    Kind.CREDENTIALS: (30, 30),
    Kind.MANAGEMENT: (600, 100),
    Kind.REGISTRATION: (60, 60),
}


@dataclass(frozen=True)
class Quota:
    """What the ``RateLimit-*`` headers say: the burst, the tokens left, seconds until full."""

    limit: int
    remaining: int
    reset_s: float

    def headers(self) -> dict[str, str]:
        return {
            "RateLimit-Limit": str(self.limit),
            "RateLimit-Remaining": str(self.remaining),
            "RateLimit-Reset": str(math.ceil(self.reset_s)),
        }


def quota_of(bucket: limits.Bucket, per_minute: int, capacity: int) -> Quota:
    reset = limits.full_in_s(bucket, per_minute, capacity)
    return Quota(capacity, math.floor(bucket.tokens), reset)


def retry_data(seconds: float, quota: Quota | None = None) -> dict[str, Any]:
    """The headers (``Retry-After``, and the bucket's ``RateLimit-*`` when there is one) and
    ``retry_after_ms`` of a 429 (04 §1.6)."""
    headers = (quota.headers() if quota else {}) | {
        "Retry-After": str(limits.retry_after_header(seconds))
    }
    return {"headers": headers, "retry_after_ms": math.ceil(seconds * 1000)}


class RequestLimits:
    """``enforce`` off (``request_rate_limits``, for load tests): nothing is refused, and the
    answers carry no ``RateLimit-*`` headers."""

    def __init__(
        self, clock: Callable[[], float] = time.monotonic, *, enforce: bool = True
    ) -> None:
        self.clock, self.enforce = clock, enforce
        self.buckets: dict[tuple[Kind, uuid.UUID], limits.Bucket] = {}

    def take(self, kind: Kind, key: uuid.UUID) -> Quota | None:
        """One request of ``key`` in bucket ``kind``; AB-5008 when it has no token left."""
        if not self.enforce:
            return None
        per_minute, burst = RULES[kind]
        taken = limits.take(self.buckets.get((kind, key)), self.clock(), per_minute, burst)
        if taken.retry_after_s is not None:
            quota = quota_of(taken.bucket, per_minute, burst)
            raise ApiRateLimited(
                f"more than {per_minute} requests per minute ({kind} requests)",
                **retry_data(taken.retry_after_s, quota),
            )
        if len(self.buckets) >= MAX_KEYS:
            self._forget_full()
        self.buckets[(kind, key)] = taken.bucket
        return quota_of(taken.bucket, per_minute, burst)

    def _forget_full(self) -> None:
        """Drop the buckets that have refilled (a new bucket starts full, so nothing changes
        for their keys); if every key is busy, start over."""
        now = self.clock()
        for bucket_key, bucket in list(self.buckets.items()):
            per_minute, burst = RULES[bucket_key[0]]
            if limits.refill(bucket, now, per_minute, burst).tokens >= burst:
                del self.buckets[bucket_key]
        if len(self.buckets) >= MAX_KEYS:
            self.buckets.clear()


def note_quota(conn: HTTPConnection, quota: Quota | None) -> None:
    """Have ``response_headers.GatewayHeaders`` put ``quota`` on this request's response."""
    if quota is not None:
        state: MutableMapping[str, Any] = conn.scope.setdefault("state", {})
        state[STATE_KEY] = quota
