"""The fleet overview's numbers and its SVG charts, as pure functions: counts add up, every
state is shown, the silent come longest-silent first, and chart text is always escaped."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from uuid import UUID, uuid4

from hypothesis import given
from hypothesis import strategies as st
from strataplane.console.charts import BAR_WIDTH, bar_width, bars, share
from strataplane.domain.fleet_overview import HEALTH, SYNC, overview

T0 = datetime(2026, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class A:
    id: UUID
    host_id: UUID
    kind: str
    version: str | None
    health: str
    sync: str
    last_seen_at: datetime | None


hosts = [uuid4() for _ in range(4)]
agents = st.builds(
    A,
    id=st.uuids(),
    host_id=st.sampled_from(hosts),
    kind=st.sampled_from(["telegraf", "vector", "elastic-agent"]),
    version=st.one_of(st.none(), st.sampled_from(["1.39.1", "0.49.0"])),
    health=st.sampled_from(HEALTH),
    sync=st.sampled_from(SYNC),
    last_seen_at=st.one_of(st.none(), st.integers(0, 10**6).map(lambda s: T0 + timedelta(s))),
)


@given(st.lists(agents, max_size=40))
def test_counts_add_up(fleet: list[A]) -> None:
    view = overview(fleet)
    assert view.agents == len(fleet)
    for counts in (view.by_kind, view.by_health, view.by_sync, view.versions):
        assert sum(n for _, n in counts) == len(fleet)
    assert [k for k, _ in view.by_health] == list(HEALTH)  # every state, zero or not
    assert view.in_sync == dict(view.by_sync)["in_sync"]
    assert view.hosts == len({a.host_id for a in fleet})
    silent = [next(a for a in fleet if a.id == i) for i in view.not_reporting]
    assert {a.id for a in silent} == {a.id for a in fleet if a.health == "not_reporting"}
    seen = [a.last_seen_at for a in silent if a.last_seen_at is not None]
    assert seen == sorted(seen)  # never seen first, then longest silent
    assert view.in_sync_share is None if not fleet else 0 <= view.in_sync_share <= 1


@given(st.lists(st.tuples(st.text(max_size=30), st.integers(0, 10**6)), max_size=12), st.text())
def test_charts_are_well_formed_svg_whatever_the_labels(
    items: list[tuple[str, int]], title: str
) -> None:
    for svg in (bars(title, items), share(title, 3, 7)):
        cleaned = re.sub(r"[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]", "", str(svg))
        root = ET.fromstring(cleaned)  # noqa: S314 - our own output, parsed to prove it well formed
        assert root.get("role") == "img"
        assert root.get("aria-label")  # the data, for screen readers


@given(st.integers(0, 10**6), st.integers(1, 10**6))
def test_bars_are_proportional_and_a_nonzero_count_shows(count: int, largest: int) -> None:
    width = bar_width(min(count, largest), largest)
    assert 0 <= width <= BAR_WIDTH
    assert (width > 0) == (min(count, largest) > 0)
    assert bar_width(largest, largest) == BAR_WIDTH
