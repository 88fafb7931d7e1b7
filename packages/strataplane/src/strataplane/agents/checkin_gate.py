"""How many Elastic Agent check-in rounds a worker runs at once, and which held check-ins a
NOTIFY wakes.

A check-in round (agents/elastic.py ``_exchange``) is one database transaction. Without a bound
a burst of rounds (a fleet starting, or a re-render waking thousands of held long polls) asks
the connection pool for more connections than it has, and the requests that wait too long for
one fail. ``CheckinGate`` bounds them:

- at most ``rounds`` rounds run at once per worker; the others wait their turn;
- acknowledgements go first, with a line of their own: an acknowledgement finishes what a
  round delivered (it proves the agent's policy and empties its pending actions), so it is
  worth more than a new check-in, and a fleet starting at once must not crowd it out;
- a check-in that arrives while ``queue`` requests already wait is refused with 503 and
  ``Retry-After`` (Elastic Agent treats any non-200 check-in as an error and retries after its
  back-off, 60 s to 10 min with jitter by default); an acknowledgement only when ``queue``
  acknowledgements already wait;
- a held check-in woken by a notice never gets a 503 (it has no back-off of its own: it holds
  its connection); it waits for a free slot after every arrival waiting, so agents already
  answered acknowledge and prove their policy before the next woken poll takes a slot.

Held check-ins wait on their own ``Event``, set by the notice about that agent (``agent:``),
its range of agents (``agents:``, one re-render batch) or its tenant (``tenant:``); there is
no periodic check. ``Hold.direct`` tells a notice about this one agent (an action may be queued
for it) from one about many (only a changed desired artifact concerns it).
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections import deque
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from uuid import UUID

from strataplane import errors

__all__ = ["Busy", "CheckinGate", "Hold"]


class Busy(errors.StrataplaneError):
    code, status, title = "agent.busy", 503, "The server is busy; check in again later"


@dataclass(eq=False)
class Hold:
    """One held check-in."""

    tenant_id: UUID
    event: asyncio.Event = field(default_factory=asyncio.Event)
    direct: bool = False  # woken by a notice naming this agent

    def wake(self, direct: bool) -> None:
        self.direct = self.direct or direct
        self.event.set()

    async def wait(self, seconds: float) -> bool:
        """True when woken before ``seconds`` passed; clears the wake-up."""
        if seconds <= 0:
            return False
        try:
            async with asyncio.timeout(seconds):
                await self.event.wait()
        except TimeoutError:
            return False
        self.event.clear()
        return True


class CheckinGate:
    def __init__(self, rounds: int, queue: int) -> None:
        self._size = self._free = rounds
        self._queue = queue
        self._acks: deque[asyncio.Future[None]] = deque()
        self._arrivals: deque[asyncio.Future[None]] = deque()
        self._woken: deque[asyncio.Future[None]] = deque()
        self._held: dict[UUID, Hold] = {}
        self._round_seconds = 0.01  # moving average, for Retry-After
        self.refused = 0

    # -- rounds -------------------------------------------------------------------------------

    @property
    def waiting(self) -> int:
        return len(self._acks) + len(self._arrivals) + len(self._woken)

    def retry_after(self) -> int:
        """Seconds until the rounds waiting now would have run, at least 1."""
        return max(1, math.ceil(self.waiting * self._round_seconds / max(1, self._size)))

    def admit(self) -> None:
        """Refuse with 503 a request that just arrived when the queue is full (before its body
        is read: a refusal should cost the server next to nothing)."""
        if self._free <= 0 and self.waiting >= self._queue:
            self.refused += 1
            raise Busy(headers={"Retry-After": str(self.retry_after())})

    def admit_ack(self) -> None:
        """Refuse with 503 an acknowledgement when ``queue`` acknowledgements already wait."""
        if self._free <= 0 and len(self._acks) >= self._queue:
            self.refused += 1
            raise Busy(headers={"Retry-After": str(self.retry_after())})

    @contextlib.asynccontextmanager
    async def acknowledgement(self) -> AsyncIterator[None]:
        """The round of an acknowledgement: before every other waiting round."""
        self.admit_ack()
        async with self._round(self._acks):
            yield

    @contextlib.asynccontextmanager
    async def arrival(self) -> AsyncIterator[None]:
        """A round of a request that just arrived: refused with 503 when the queue is full."""
        self.admit()
        async with self._round(self._arrivals):
            yield

    @contextlib.asynccontextmanager
    async def woken(self) -> AsyncIterator[None]:
        """A round of a held check-in a notice woke: waits, never refused."""
        async with self._round(self._woken):
            yield

    @contextlib.asynccontextmanager
    async def _round(self, line: deque[asyncio.Future[None]]) -> AsyncIterator[None]:
        if self._free > 0 and not self.waiting:
            self._free -= 1
        else:
            turn = asyncio.get_running_loop().create_future()
            line.append(turn)
            try:
                await turn  # the slot is handed over by _release
            except asyncio.CancelledError:
                if turn.done() and not turn.cancelled():
                    self._release()  # handed over as we were cancelled: pass it on
                else:
                    line.remove(turn)
                raise
        started = time.monotonic()
        try:
            yield
        finally:
            self._round_seconds += (time.monotonic() - started - self._round_seconds) * 0.05
            self._release()

    def _release(self) -> None:
        for line in (self._acks, self._arrivals, self._woken):
            while line:
                turn = line.popleft()
                if not turn.done():
                    turn.set_result(None)
                    return
        self._free += 1

    # -- held check-ins -----------------------------------------------------------------------

    @contextlib.contextmanager
    def hold(self, tenant_id: UUID, agent_id: UUID) -> Iterator[Hold]:
        held = Hold(tenant_id)
        self._held[agent_id] = held  # a newer check-in of the agent replaces an older one
        try:
            yield held
        finally:
            if self._held.get(agent_id) is held:
                del self._held[agent_id]

    @property
    def held(self) -> int:
        return len(self._held)

    def wake_agent(self, tenant_id: UUID, agent_id: UUID) -> None:
        held = self._held.get(agent_id)
        if held is not None and held.tenant_id == tenant_id:
            held.wake(direct=True)

    def wake_range(self, tenant_id: UUID, first: UUID, last: UUID) -> None:
        for agent_id, held in self._held.items():
            if held.tenant_id == tenant_id and first <= agent_id <= last:
                held.wake(direct=False)

    def wake_tenant(self, tenant_id: UUID) -> None:
        for held in self._held.values():
            if held.tenant_id == tenant_id:
                held.wake(direct=False)

    def wake_all(self) -> None:
        """Notices may have been missed (the listener reconnected): every held check-in looks
        again, as if each had its own notice."""
        for held in self._held.values():
            held.wake(direct=True)
