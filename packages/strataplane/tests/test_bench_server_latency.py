"""The bench's server-side quantile, read from two scrapes of a real prometheus histogram: the
bound it names is the smallest bucket bound at or above the true quantile of what was observed
between the scrapes, over the agent routes only."""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, Histogram, generate_latest
from strataplane.simulate.server_latency import quantile_ms

BOUNDS = (0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0)
ROUTES = ("/agents/telegraf/config", "/agents/telegraf/heartbeat")
seconds = st.floats(min_value=0.0, max_value=2.0, allow_nan=False)


def histogram() -> tuple[CollectorRegistry, Histogram]:
    registry = CollectorRegistry()
    labels = ("method", "route", "status")
    metric = Histogram(
        "http_request_duration_seconds", "t", labels, registry=registry, buckets=BOUNDS
    )
    return registry, metric


@given(
    st.lists(seconds, max_size=20),
    st.lists(seconds, min_size=1, max_size=200),
    st.lists(seconds, max_size=20),
    st.sampled_from([0.5, 0.9, 0.99, 1.0]),
)
def test_the_named_bound_is_the_smallest_one_covering_the_quantile(
    earlier: list[float], between: list[float], other_route: list[float], q: float
) -> None:
    registry, metric = histogram()
    for value in earlier:
        metric.labels("HEAD", ROUTES[0], "200").observe(value)
    before = generate_latest(registry).decode()
    for n, value in enumerate(between):
        metric.labels("HEAD" if n % 2 else "POST", ROUTES[n % 2], "200").observe(value)
    for value in other_route:
        metric.labels("GET", "/api/v1/hosts", "200").observe(value)
    after = generate_latest(registry).decode()

    ranked = sorted(between)
    needed = math.ceil(q * len(ranked))
    covered = [b for b in (*BOUNDS, math.inf) if sum(v <= b for v in ranked) >= needed]
    expected = covered[0] * 1000 if covered[0] < math.inf else None
    assert quantile_ms(before, after, q) == expected


def test_no_agent_requests_between_the_scrapes_gives_none() -> None:
    registry, metric = histogram()
    metric.labels("GET", "/api/v1/hosts", "200").observe(0.1)
    text = generate_latest(registry).decode()
    assert quantile_ms(text, text, 0.99) is None
    assert quantile_ms("", "", 0.99) is None
