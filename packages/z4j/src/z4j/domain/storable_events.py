"""Which events of a batch PostgreSQL can store, which are repaired and which are refused.

Agents report what their workers saw, so their data is never refused whole. An event whose
text holds a NUL or a lone surrogate is kept with those characters replaced by U+FFFD and is
marked (``data.z4j_repaired``); an event holding NaN or an infinity, which no JSON column can
store, is refused alone, with the reason and where it was found. Integers of any size are
kept: an event's data is stored as ``jsonb``, whose numbers have no 64-bit bound, and the few
fields bound for typed columns (``retry_count``, ``runtime_ms``) are checked where the batch
is folded (``z4j.ingest.fold``). Every other event of the batch goes on as it came.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from platformkit.storable import Unstorable, find_unstorable, scrub

REPAIRED_KEY = "z4j_repaired"
# jsonb numbers have no integer bound that a parsed value (at most 4,300 digits) can pass
_JSONB_INT_BOUND = 10**4301


@dataclass(frozen=True)
class Refusal:
    """One event left out of a batch: its position in the batch, its id and why."""

    index: int
    event_id: str | None
    reason: str


@dataclass
class Screened:
    events: list[Any]
    # the position in the batch of each event kept, when some were left out
    positions: list[int] | None = None
    refused: list[Refusal] = field(default_factory=list)
    repaired: int = 0

    def position(self, index: int) -> int:
        return index if self.positions is None else self.positions[index]


def event_id_of(event: Any) -> str | None:
    event_id = event.get("id") if isinstance(event, dict) else None
    return event_id[:64] if isinstance(event_id, str) else None


def _problem(event: Any) -> Unstorable | None:
    return find_unstorable(event, int_min=-_JSONB_INT_BOUND, int_max=_JSONB_INT_BOUND)


def screen_events(events: list[Any]) -> Screened:
    """Keep, repair or refuse each event; the events kept stay in their order."""
    kept: list[Any] = []
    positions: list[int] = []
    out = Screened(kept)
    for index, event in enumerate(events):
        problem = _problem(event)
        if problem is not None:
            event, changed = scrub(event)
            if changed:
                problem = _problem(event)
            if problem is not None:
                where = f"{problem.path}: " if problem.path else ""
                out.refused.append(Refusal(index, event_id_of(event), where + problem.reason))
                continue
            event = _marked(event)
            out.repaired += 1
        kept.append(event)
        positions.append(index)
    if out.refused:
        out.positions = positions
    return out


def _marked(event: Any) -> Any:
    if not isinstance(event, dict):
        return event
    data = event.get("data")
    return {**event, "data": {**data, REPAIRED_KEY: True} if isinstance(data, dict) else data}
