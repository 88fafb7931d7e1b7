"""The send limits of 05-DELIVERY-SEMANTICS §11 at step 11 of 04-API-SPEC §4.1: after the
policy, inside the transaction that validates the send, so a refused send stores nothing. A
replay or a duplicate task request is answered before this step and takes no token.

Per gateway process: each sender's token bucket, and for ``INFO_TTL_S`` (2 s) each tenant's
effective limits, each recipient's backlog and each tenant stream's size; concurrent sends may
overshoot the backlog and stream limits by a few messages, as 05 §11 allows. The rules
themselves are the pure functions of ``agentbus.gateway.domain.limits``.

Decisions: buckets are per process, so a gateway with several worker processes allows each of
them the full rate; while NATS is unreachable the backlog and stream checks are skipped (sends
still succeed then, 05 §13.2); a limit missing from the plan is not enforced; a full backlog
answers ``Retry-After: 10``; AB-5005 (507) carries no ``Retry-After``.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from platformkit.db.scope import Conn

from agentbus.broker import Broker, consumer_name, stream_name
from agentbus.gateway.api.request_limits import Quota, quota_of, retry_data
from agentbus.gateway.domain import limits
from agentbus.gateway.domain.errors import RateLimited, RecipientBacklogFull, StreamFull
from agentbus.store import plans

if TYPE_CHECKING:
    from agentbus.gateway.actions.hooks import PendingSend

INFO_TTL_S = 2.0
BACKLOG_RETRY_S = 10.0


def _limit(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


class SendLimits:
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.buckets: dict[uuid.UUID, limits.Bucket] = {}
        self._cache: dict[tuple[str, uuid.UUID], tuple[float, Any]] = {}

    async def _cached(self, key: tuple[str, uuid.UUID], load: Callable[[], Awaitable[Any]]) -> Any:
        hit = self._cache.get(key)
        if hit is not None and hit[0] > self.clock():
            return hit[1]
        value = await load()
        self._cache[key] = (self.clock() + INFO_TTL_S, value)
        return value

    def _take(self, sender: uuid.UUID, per_minute: int) -> limits.Bucket:
        taken = limits.take(self.buckets.get(sender), self.clock(), per_minute)
        if taken.retry_after_s is not None:
            quota = quota_of(taken.bucket, per_minute, per_minute)
            raise RateLimited(
                f"more than {per_minute} sends per minute",
                **retry_data(taken.retry_after_s, quota),
            )
        return taken.bucket

    def _known_rate(self, tenant_id: uuid.UUID) -> int | None:
        """The tenant's sends per minute, once its limits were read here (and still kept)."""
        hit = self._cache.get(("limits", tenant_id))
        return None if hit is None else _limit(hit[1].get("publish_per_minute"))

    def quota(self, tenant_id: uuid.UUID, sender: uuid.UUID) -> Quota | None:
        """The sender's bucket as ``RateLimit-*`` headers say it, once its tenant's limits are
        known here (after its first send that reached the check) and set a rate."""
        rate = self._known_rate(tenant_id)
        if rate is None:
            return None
        return quota_of(limits.refill(self.buckets.get(sender), self.clock(), rate), rate, rate)

    def give_back(self, tenant_id: uuid.UUID, sender: uuid.UUID, tokens: int) -> None:
        """Return the tokens of sends that were taken and then undone with their transaction
        (a shared one that failed, whose requests run again one by one)."""
        rate = self._known_rate(tenant_id)
        bucket = self.buckets.get(sender)
        if tokens and rate is not None and bucket is not None:
            self.buckets[sender] = limits.give_back(bucket, self.clock(), rate, tokens)

    async def check(self, conn: Conn, broker: Broker, send: PendingSend) -> None:
        """AB-5003, AB-5004, AB-5005 in this order; the sender's token is taken only when all
        three pass."""
        tenant_id, sender = send.tenant_id, send.principal.agent_id
        assert send.recipient is not None
        recipient: uuid.UUID = send.recipient["id"]

        async def effective() -> dict[str, Any]:
            return await plans.effective_limits(conn, tenant_id)

        async def pending() -> int | None:
            try:
                info = await broker.js.consumer_info(
                    stream_name(tenant_id), consumer_name(recipient)
                )
            except Exception:  # NATS away, or no consumer yet: nothing is pending
                return None
            return int(info.num_pending or 0) + int(info.num_ack_pending or 0)

        async def stored() -> int | None:
            try:
                info = await broker.js.stream_info(stream_name(tenant_id))
            except Exception:
                return None
            return int(info.state.bytes or 0)

        plan: dict[str, Any] = await self._cached(("limits", tenant_id), effective)
        rate = _limit(plan.get("publish_per_minute"))
        if rate is not None:
            self._take(sender, rate)  # refuses early; the token is taken below
        backlog = _limit(plan.get("pending_per_agent"))
        if backlog is not None:
            count = await self._cached(("pending", recipient), pending)
            if count is not None and limits.backlog_full(count, backlog):
                raise RecipientBacklogFull(
                    f"the recipient has {count} messages pending (limit {backlog})",
                    **retry_data(BACKLOG_RETRY_S),
                )
        size = _limit(plan.get("stream_bytes"))
        if size is not None:
            used = await self._cached(("stream", tenant_id), stored)
            if used is not None and limits.stream_full(used, size):
                raise StreamFull(f"the tenant stream holds {used} bytes (limit {size})")
        if rate is not None:
            self.buckets[sender] = self._take(sender, rate)  # again: a concurrent send may have won
