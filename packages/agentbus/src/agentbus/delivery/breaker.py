"""Pulls stop while a service they need is down (05-DELIVERY-SEMANTICS.md §13.4): PostgreSQL,
or the object store that holds the payloads.

A copy pulled from JetStream counts as a delivery attempt, and one the gateway cannot hand out
is naked, which counts again when it comes back: pulling on through an outage of a few minutes
would dead-letter everything waiting (MaxDeliver). So the first failure opens that service's
breaker in this gateway process; while any breaker is open, pulls take nothing from JetStream and
answer empty, and one probe per service every ``probe_every_s`` decides when they go on.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

log = logging.getLogger(__name__)

PROBE_EVERY_S = 5.0


@dataclass
class Breaker:
    """Closed while the service answers; open from a failure until a probe finds it answering."""

    probe_every_s: float = PROBE_EVERY_S
    next_probe_at: float | None = None
    """Monotonic time of the next probe while open; None while closed."""

    @property
    def closed(self) -> bool:
        return self.next_probe_at is None

    def trip(self, now: float) -> bool:
        """A call failed at ``now`` (the work's or a probe's): open, with the next probe one
        period later. True when this opened it (it was closed)."""
        opened = self.closed
        self.next_probe_at = now + self.probe_every_s
        return opened

    def close(self) -> bool:
        """A probe found the service answering. True when this closed it (it was open)."""
        was_open = not self.closed
        self.next_probe_at = None
        return was_open

    def probe_due(self, now: float) -> bool:
        return self.next_probe_at is not None and now >= self.next_probe_at

    def until_probe(self, now: float) -> float:
        """Seconds until the next probe is due (0 while closed or when due)."""
        return 0.0 if self.next_probe_at is None else max(0.0, self.next_probe_at - now)


@dataclass
class Dependency:
    """A service pulls need: its breaker, and a probe that says whether it answers."""

    name: str
    probe: Callable[[], Awaitable[bool]]
    breaker: Breaker = field(default_factory=Breaker)

    def failed(self, now: float) -> None:
        if self.breaker.trip(now):
            log.warning(
                "%s unavailable: pulls paused, probing every %.0f s",
                self.name, self.breaker.probe_every_s,
            )  # fmt: skip

    async def answers(self, now: float) -> bool:
        """True while closed, or when a probe due at ``now`` found it answering (closing it)."""
        if self.breaker.closed:
            return True
        if not self.breaker.probe_due(now):
            return False
        if not await self.probe():
            self.breaker.trip(now)
            return False
        self.breaker.close()
        log.warning("%s answers again: pulls resume", self.name)
        return True
