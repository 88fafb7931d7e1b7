"""The server's own view of agent request latency during a bench: the difference of two scrapes
of its ``http_request_duration_seconds`` histogram (all workers, all agent endpoints), read as a
quantile. It leaves out what the simulator's latency includes besides the server: its own event
loop's delay, the network stack and granian's queue before the app is called.
"""

from __future__ import annotations

import math
import re
import urllib.request
from collections import defaultdict

_BUCKET = re.compile(r"^http_request_duration_seconds_bucket\{(?P<labels>[^}]*)\} (?P<value>\S+)$")
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def buckets(exposition: str, route_prefix: str = "/agents/") -> defaultdict[float, float]:
    """Cumulative counts by upper bound, summed over the routes under ``route_prefix``."""
    counts: defaultdict[float, float] = defaultdict(float)
    for line in exposition.splitlines():
        match = _BUCKET.match(line)
        if match is None:
            continue
        labels = dict(_LABEL.findall(match["labels"]))
        if labels.get("route", "").startswith(route_prefix):
            counts[float(labels["le"])] += float(match["value"])
    return counts


def quantile_ms(before: str, after: str, q: float) -> float | None:
    """The upper bound (ms) of the bucket holding the ``q`` quantile of the requests between the
    two scrapes; None when none were answered or when it lies past the last finite bound."""
    start, end = buckets(before), buckets(after)
    bounds = sorted(end)
    if not bounds:
        return None
    total = end[math.inf] - start[math.inf]
    if total <= 0:
        return None
    for bound in bounds:
        if end[bound] - start[bound] >= q * total:
            return bound * 1000 if math.isfinite(bound) else None
    return None


def scrape(base_url: str) -> str:
    with urllib.request.urlopen(f"{base_url}/metrics", timeout=10) as reply:  # noqa: S310
        text: str = reply.read().decode()
    return text
