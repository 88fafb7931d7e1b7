"""A dependency's breaker as a rule: closed until a failure, then open with one probe per
period, and closed again only by a probe that found the service answering."""

from __future__ import annotations

from agentbus.delivery.breaker import Breaker
from hypothesis import given
from hypothesis import strategies as st

times = st.floats(min_value=0, max_value=1e6, allow_nan=False)
periods = st.floats(min_value=0.1, max_value=600, allow_nan=False)


@given(now=times, period=periods, later=st.floats(min_value=0, max_value=1e3))
def test_a_failure_opens_it_until_one_period_later(now: float, period: float, later: float) -> None:
    breaker = Breaker(probe_every_s=period)
    assert breaker.closed
    assert not breaker.probe_due(now)
    assert breaker.until_probe(now) == 0
    assert breaker.trip(now) is True
    assert not breaker.closed
    assert breaker.probe_due(now + later) == (now + later >= now + period)
    assert breaker.until_probe(now + later) == max(0.0, now + period - (now + later))


@given(now=times, period=periods, gaps=st.lists(st.floats(min_value=0, max_value=60), max_size=8))
def test_failed_probes_keep_it_open_and_only_the_first_failure_opens_it(
    now: float, period: float, gaps: list[float]
) -> None:
    breaker = Breaker(probe_every_s=period)
    breaker.trip(now)
    for gap in gaps:
        now += gap
        assert breaker.trip(now) is False  # already open: a failed probe or another failure
        assert not breaker.closed
        assert not breaker.probe_due(now)
    assert breaker.close() is True
    assert breaker.closed
    assert breaker.close() is False
