"""Pulls stop while the object store is down (05-DELIVERY-SEMANTICS.md §13.4).

A copy whose payload cannot be read is naked, and every nak counts toward MaxDeliver: pulling on
through an outage of a few minutes would dead-letter everything waiting. So the first failed read
opens the breaker of this gateway process; while it is open, pulls hand out nothing and take
nothing from JetStream, and one probe (a read of a key that does not exist, which a working store
answers with "missing") every ``probe_every_s`` decides when they go on.
"""

from __future__ import annotations

from dataclasses import dataclass

PROBE_EVERY_S = 5.0
PROBE_KEY = "health/pulls-probe"


@dataclass
class StoreBreaker:
    """Closed while the store answers; open from a failure until a probe finds it answering."""

    probe_every_s: float = PROBE_EVERY_S
    next_probe_at: float | None = None
    """Monotonic time of the next probe while open; None while closed."""

    @property
    def closed(self) -> bool:
        return self.next_probe_at is None

    def trip(self, now: float) -> bool:
        """A read failed at ``now`` (a payload's or a probe's): open, with the next probe one
        period later. True when this opened it (it was closed)."""
        opened = self.closed
        self.next_probe_at = now + self.probe_every_s
        return opened

    def close(self) -> bool:
        """A probe found the store answering. True when this closed it (it was open)."""
        was_open = not self.closed
        self.next_probe_at = None
        return was_open

    def probe_due(self, now: float) -> bool:
        return self.next_probe_at is not None and now >= self.next_probe_at

    def until_probe(self, now: float) -> float:
        """Seconds until the next probe is due (0 while closed or when due)."""
        return 0.0 if self.next_probe_at is None else max(0.0, self.next_probe_at - now)
