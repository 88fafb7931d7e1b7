"""The benchmark's lone rounds (``--lone-rounds N``): messages one at a time, each a send, a
pull and a read in turn with nothing else in flight, so each request's CPU can be told apart.

N metered rounds come first: between requests the CPU meter is read (``bench.cpu``), and what
each service spent meanwhile is charged to that request. The machine's other work is idle then,
so this is what the request cost the gateway, PostgreSQL and NATS. ``/proc`` counts in clock
ticks (10 ms), so a single request reads as 0 or 10 ms; the means over many rounds are what the
line reports. Then N rounds back to back give the wall times (a round's is the sum of its three
requests'): a reading of the meter walks ``/proc`` for some milliseconds, and services left idle
that long answer the next request about a third slower, so metered rounds would overstate them.
"""

from __future__ import annotations

import json
import statistics
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from agentbus.bench.cpu import CpuMeter
from agentbus.bench.http import Client, HttpError

REQUESTS = ("send", "pull", "read")


def _spent(
    into: defaultdict[str, float], before: Mapping[str, float], after: Mapping[str, float]
) -> None:
    for name, seconds in after.items():
        if name != "client" and name in before:
            into[name] += seconds - before[name]


def read_all(deliveries: list[dict[str, Any]]) -> dict[str, Any]:
    """The body of ``POST /v1/inbox/read`` that application-acks every delivery now."""
    stamp = datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    return {
        "reads": [{"msg_id": d["msg_id"], "read_at": stamp, "outcome": "read"} for d in deliveries]
    }


def _answer(status: int, content: bytes) -> dict[str, Any]:
    if status != 200:
        raise HttpError(f"{status}: {content[:300]!r}")
    body: dict[str, Any] = json.loads(content)
    return body


async def _round(
    send_client: Client,
    recv_client: Client,
    body: bytes,
    after: Callable[[str], None],
) -> float:
    """One message's send, pull and read in turn; ``after(kind)`` runs once each request has
    its answer. The sum of the three requests' wall times, in ms (``after`` left out)."""
    wall = 0.0
    start = time.perf_counter()
    sent = _answer(
        *await send_client.request("POST", "/v1/messages/batch", body, "application/json")
    )
    wall += time.perf_counter() - start
    if [r.get("status") for r in sent.get("results", [])] != [202]:
        raise HttpError(f"the send was not accepted: {sent}")
    after("send")

    deliveries: list[dict[str, Any]] = []
    start = time.perf_counter()
    while not deliveries:
        pulled = _answer(*await recv_client.request("GET", "/v1/inbox?wait_s=2&max=100"))
        deliveries = pulled.get("deliveries") or []
    wall += time.perf_counter() - start
    after("pull")

    read = json.dumps(read_all(deliveries)).encode()
    start = time.perf_counter()
    _answer(*await recv_client.request("POST", "/v1/inbox/read", read, "application/json"))
    wall += time.perf_counter() - start
    after("read")
    return wall * 1000


async def lone_rounds(
    send_client: Client,
    recv_client: Client,
    envelope: Callable[[int], bytes],
    rounds: int,
    meter: CpuMeter,
) -> dict[str, Any]:
    """Run the rounds twice, metered and back to back; the line the benchmark prints."""
    spent: dict[str, defaultdict[str, float]] = {kind: defaultdict(float) for kind in REQUESTS}
    last = meter.take()

    def charge(kind: str) -> None:
        nonlocal last
        now = meter.take()
        _spent(spent[kind], last, now)
        last = now

    for n in range(rounds):
        await _round(send_client, recv_client, batch_body([envelope(n)]), charge)
    walls = [
        await _round(send_client, recv_client, batch_body([envelope(rounds + n)]), lambda _: None)
        for n in range(rounds)
    ]
    return summary(spent, walls)


def batch_body(envelopes: Iterable[bytes]) -> bytes:
    """The body of ``POST /v1/messages/batch`` carrying these canonical envelopes."""
    return b'{"envelopes":[' + b",".join(envelopes) + b"]}"


def percentile(ordered: list[float], p: float) -> float | None:
    """The ``p`` quantile of sorted milliseconds, rounded to microseconds; None for none."""
    return round(ordered[min(len(ordered) - 1, int(p * len(ordered)))], 3) if ordered else None


def summary(spent: Mapping[str, Mapping[str, float]], walls: list[float]) -> dict[str, Any]:
    rounds = len(walls)
    ordered = sorted(walls)

    return {
        "bench": "gateway",
        "mode": "lone",
        "rounds": rounds,
        "round_p50_ms": percentile(ordered, 0.50),
        "round_p99_ms": percentile(ordered, 0.99),
        "round_mean_ms": round(statistics.fmean(walls), 3) if walls else None,
        "cpu_ms_per_request": {
            kind: {name: round(s * 1000 / rounds, 3) for name, s in sorted(per.items())}
            for kind, per in spent.items()
        }
        if rounds
        else None,
    }
