"""Many simulated Telegraf or Vector instances in one process, reporting request rate and
latency.

``run_fleet`` starts one ``SimulatedTelegraf`` (or ``SimulatedVector``) per credential, their
start-up GETs spread over one watch (poll) interval (as a real fleet's restarts are), and every
``report_every`` seconds writes a JSON line: requests and their p50/p99 latency in the window,
instances running, reloads, exits.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import Sequence
from typing import TextIO

from strataplane.simulate.elastic import EqualJitter, SimulatedElasticAgent
from strataplane.simulate.http import HttpPool
from strataplane.simulate.telegraf import SimulatedTelegraf
from strataplane.simulate.vector import SimulatedVector

type Simulated = SimulatedTelegraf | SimulatedVector | SimulatedElasticAgent


def percentile(values: Sequence[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _simulated(
    kind: str,
    pool: HttpPool,
    instance: str,
    token: str,
    version: str,
    interval: float,
    backoff: tuple[float, float],
) -> Simulated:
    if kind == "elastic-agent":  # seeded: the access key is the credential, no enrollment
        return SimulatedElasticAgent(
            pool,
            instance,
            instance,
            version=version,
            retry_delay=1.0,
            access_key=token,
            backoff=EqualJitter(*backoff),
        )
    if kind == "vector":
        env = {"STRATAPLANE_VECTOR_TOKEN": token, "STRATAPLANE_INSTANCE_ID": instance}
        return SimulatedVector(
            pool,
            "/agents/vector/config",
            {**env, "HOSTNAME": instance},
            version=version,
            poll_interval=interval,
            retry_delay=1.0,
        )
    env = {"TELEGRAF_CONTROLLER_TOKEN": token, "INFLUX_TOKEN": token}
    return SimulatedTelegraf(
        pool,
        "/agents/telegraf/config",
        {**env, "STRATAPLANE_INSTANCE_ID": instance, "HOSTNAME": instance},
        version=version,
        watch_interval=interval,
        retry_delay=1.0,
    )


async def _started(sim: Simulated, delay: float) -> None:
    await asyncio.sleep(delay)
    await sim.run()


async def run_fleet(
    base_url: str,
    credentials: Sequence[tuple[str, str]],
    *,
    watch_interval: float,
    duration: float,
    version: str = "1.39.1",
    connections: int = 200,
    report_every: float = 5.0,
    out: TextIO = sys.stdout,
    kind: str = "telegraf",
    backoff: tuple[float, float] = (60.0, 600.0),
) -> list[Simulated]:
    """Run until ``duration`` passes; ``credentials`` are (instance id, spt_ or spv_ token)
    pairs; ``watch_interval`` is Vector's ``poll_interval_secs`` for ``kind`` vector;
    ``backoff`` Elastic Agents' check-in back-off, initial and longest (seconds)."""
    pool = HttpPool(base_url, size=connections)
    sims = [
        _simulated(kind, pool, instance, token, version, watch_interval, backoff)
        for instance, token in credentials
    ]
    spread = watch_interval / max(1, len(sims))
    tasks = [asyncio.create_task(_started(s, i * spread)) for i, s in enumerate(sims)]
    started = time.monotonic()
    try:
        while (elapsed := time.monotonic() - started) < duration:
            await asyncio.sleep(min(report_every, duration - elapsed))
            window: list[float] = []
            for sim in sims:
                window += sim.latencies
                sim.latencies = []
            line = {
                "t": round(time.monotonic() - started, 2),
                "requests": len(window),
                "p50_ms": round(percentile(window, 0.50) * 1000, 2),
                "p99_ms": round(percentile(window, 0.99) * 1000, 2),
                "running": sum(s.state == "running" for s in sims),
                "exited": sum(s.state == "exited" for s in sims),
                "reloads": sum(getattr(s, "reloads", 0) for s in sims),
                "backoffs": sum(getattr(s, "backoffs", 0) for s in sims),
            }
            out.write(json.dumps(line) + "\n")
            out.flush()
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await pool.close()
    return sims
