"""Many simulated Telegraf instances in one process, reporting request rate and latency.

``run_fleet`` starts one ``SimulatedTelegraf`` per credential, their start-up GETs spread over
one watch interval (as a real fleet's restarts are), and every ``report_every`` seconds writes a
JSON line: requests and their p50/p99 latency in the window, instances running, reloads, exits.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import Sequence
from typing import TextIO

from strataplane.simulate.http import HttpPool
from strataplane.simulate.telegraf import SimulatedTelegraf


def percentile(values: Sequence[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def _started(sim: SimulatedTelegraf, delay: float) -> None:
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
) -> list[SimulatedTelegraf]:
    """Run until ``duration`` passes; ``credentials`` are (instance id, spt_ token) pairs."""
    pool = HttpPool(base_url, size=connections)
    sims = [
        SimulatedTelegraf(
            pool,
            "/agents/telegraf/config",
            {
                "TELEGRAF_CONTROLLER_TOKEN": token,
                "INFLUX_TOKEN": token,
                "STRATAPLANE_INSTANCE_ID": instance,
                "HOSTNAME": instance,
            },
            version=version,
            watch_interval=watch_interval,
            retry_delay=1.0,
        )
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
                "reloads": sum(s.reloads for s in sims),
            }
            out.write(json.dumps(line) + "\n")
            out.flush()
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await pool.close()
    return sims
