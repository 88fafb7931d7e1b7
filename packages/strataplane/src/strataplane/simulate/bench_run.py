"""The sequence of ``strataplane bench fleet`` (see simulate/bench.py for the figures)."""

from __future__ import annotations

import asyncio
import json
import os
import tempfile
import threading
import time
from pathlib import Path
from typing import IO, Any
from uuid import UUID

from platformkit.http import start_server
from platformkit.testing.services import free_port

from strataplane import db
from strataplane.settings import Settings
from strataplane.simulate import bench, cpu, server_latency

_AGENTS = "SELECT count(*) FROM strataplane.agent_instance WHERE tenant_id = %s "


async def _seed(url: str, agents: int, heartbeat: float, kind: str) -> tuple[UUID, int, list[Any]]:
    from platformkit.db.pool import open_pool
    from pydantic import SecretStr

    from strataplane.actions.context import Services
    from strataplane.settings import Settings
    from strataplane.simulate.seed import publish, seed_fleet
    from strataplane.testing import Seed

    pool = await open_pool(db.app_url(url), min_size=1, max_size=4)
    try:
        services = Services(pool, Settings(database_url=SecretStr(url)))
        tenant, _admin = await Seed(services).tenant("bench")
        files = bench.spec_files(heartbeat, "false", kind)
        revision = await publish(pool, tenant.id, files, "r-a")
        groups = [{"group": f"g{g:02d}"} for g in range(bench.GROUPS)]
        version = {"vector": "0.57.0", "elastic-agent": "8.15.0"}.get(kind, "1.39.1")
        rows = await seed_fleet(pool, tenant.id, agents, groups, version=version, kind=kind)
        return tenant.id, revision, rows
    finally:
        await pool.close()


async def _merge(url: str, tenant_id: UUID, heartbeat: float, kind: str) -> tuple[int, float]:
    """The merged revision and the monotonic time its transaction committed."""
    from platformkit.db.pool import open_pool

    from strataplane.simulate.seed import publish

    pool = await open_pool(db.app_url(url), min_size=1, max_size=2)
    try:
        files = bench.spec_files(heartbeat, "true", kind)
        revision = await publish(pool, tenant_id, files, "r-b")
        return revision, time.monotonic()
    finally:
        await pool.close()


def _cpu(server: int, simulator: int) -> tuple[float, float, float]:
    """CPU seconds so far of the server, the simulator and the database's backends."""
    return (
        cpu.tree_seconds(server),
        cpu.tree_seconds(simulator),
        cpu.backend_seconds(bench.DATABASE),
    )


def _reader(stream: IO[str], windows: list[dict[str, Any]]) -> None:
    for line in stream:
        if line.startswith("{"):
            windows.append(json.loads(line))


def run(
    agents: int,
    interval: float,
    workers: int,
    connections: int,
    configured: str | None,
    heartbeat: float | None = None,
    *,
    kind: str = "telegraf",
) -> list[dict[str, Any]]:
    """``interval`` is the HEAD watch interval (Vector: the provider's poll interval);
    ``heartbeat`` that of the rendered heartbeat (by default half the watch interval, see
    docs/strataplane/fleet-internals.md)."""
    heartbeat = heartbeat if heartbeat is not None else interval / 2
    if kind == "elastic-agent":
        # a check-in holds its connection for the whole long poll, as every real agent holds
        # its own: shared connections would queue the agents behind each other's polls
        connections = max(connections, agents)
    url = bench.fresh_database(configured)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    os.environ.update(
        {
            "STRATAPLANE_DATABASE_URL": url,
            "STRATAPLANE_SHARDS": "4",
            "STRATAPLANE_FLEET_AGENT_URL": base,
            "STRATAPLANE_FLEET_CONTROLLER_INTERVAL": str(min(5.0, interval / 2)),
            # Elastic Agents' check-ins wait at most one interval for an action
            "STRATAPLANE_FLEET_ELASTIC_POLL": str(interval),
        }
    )
    settings = Settings()
    log = Path(tempfile.gettempdir()) / f"sp-bench-server-{port}.log"
    server = start_server(
        "strataplane.app:create_app",
        port=port,
        workers=workers,
        factory=True,
        log_level="warning",
        log_file=log,
        # as `strataplane serve` does: with granian's default budget (backlog / workers = 512)
        # a burst of new simulator connections waited 20 s and more to be served
        backlog=settings.backlog,
        backpressure=settings.backpressure,
    )
    sim = None
    try:
        server.wait_ready(120)
        tenant, first, rows = asyncio.run(_seed(url, agents, heartbeat, kind))
        t = (tenant,)
        bench.wait_for(url, _AGENTS + "AND desired_revision_id = %s", (*t, first), agents, 300)
        creds = bench.credentials_file(rows)
        sim = bench.start_simulator(base, creds, agents, interval, 3600, connections, kind)
        windows: list[dict[str, Any]] = []
        assert sim.stdout is not None
        threading.Thread(target=_reader, args=(sim.stdout, windows), daemon=True).start()
        in_sync = _AGENTS + "AND applied_revision_id = %s AND sync = 'in_sync'"

        def stalled() -> str | None:
            if sim.poll() is not None:
                return f"the simulator exited with status {sim.returncode}"
            if len(windows) >= 3 and not any(int(w["requests"]) for w in windows[-3:]):
                return (
                    "the simulator completed no request in 3 intervals; see the server log "
                    + str(log)
                )
            return None

        # Elastic Agents refused while the fleet starts at once come back after their back-off
        ceiling = 20 * interval + 120 if kind != "elastic-agent" else 60 * interval + 120
        bench.wait_for(url, in_sync, (*t, first), agents, ceiling, stalled)
        # One more interval before measuring: an agent in sync may still be new to one of
        # the workers, whose first request for it looks its credential up in the database.
        time.sleep(interval)
        mark = len(windows)
        before = _cpu(server.process.pid, sim.pid)
        scraped = server_latency.scrape(base)
        time.sleep(4 * interval)
        used = [b - a for a, b in zip(before, _cpu(server.process.pid, sim.pid), strict=True)]
        server_p99 = server_latency.quantile_ms(scraped, server_latency.scrape(base), 0.99)
        steady = windows[mark:]
        second, merged_at = asyncio.run(_merge(url, tenant, heartbeat, kind))
        bench.wait_for(url, _AGENTS + "AND desired_revision_id = %s", (*t, second), agents, 300)
        render = time.monotonic() - merged_at
        bench.wait_for(
            url,
            _AGENTS + "AND served_artifact = desired_artifact AND desired_revision_id = %s",
            (*t, second),
            agents,
            20 * interval + 120,
            stalled,
        )
        served = time.monotonic() - merged_at
        bench.wait_for(url, in_sync, (*t, second), agents, 20 * interval + 120, stalled)
        applied = time.monotonic() - merged_at
        creds.unlink()
        log.unlink(missing_ok=True)  # kept only when the run failed
    finally:
        if sim is not None:
            sim.terminate()
            sim.wait(30)
        server.stop()
    seconds = sum(interval for _w in steady) or 1.0
    requests = sum(int(w["requests"]) for w in steady)
    workload = {
        "kind": kind,
        "agents": agents,
        "interval_s": interval,
        "heartbeat_interval_s": heartbeat,
        "server_workers": workers,
        "label_sets": bench.GROUPS,
        "simulator_connections": connections,
    }
    per_request = [round(seconds * 1e6 / max(1, requests), 1) for seconds in used]
    cores = "; cores used: " + ", ".join(
        f"{name} {seconds / (4 * interval):.2f}"
        for name, seconds in zip(("server", "simulator", "postgres"), used, strict=True)
    )
    return [
        {
            "figure": "polls_per_sec",
            "value": round(requests / seconds, 1),
            "unit": "req/s",
            "workload": workload,
            "note": "polls (Telegraf HEAD, Vector GET), heartbeats and GETs completed, "
            "steady state",
        },
        {
            "figure": "p99_ms",
            "value": max((float(w["p99_ms"]) for w in steady), default=0.0),
            "unit": "ms",
            "workload": workload,
            "note": "worst 99th percentile of the windows",
        },
        {
            "figure": "server_p99_ms",
            "value": server_p99,
            "unit": "ms",
            "workload": workload,
            "note": "99th percentile of the server's own time per agent request over the steady "
            "windows (its latency histogram: the bucket bound at or above it); p99_ms is the "
            "simulator's view, with its own scheduling and granian's queue",
        },
        {
            "figure": "render_seconds",
            "value": round(render, 2),
            "unit": "s",
            "workload": workload,
            "note": "merge commit -> every desired artifact rendered",
        },
        {
            "figure": "seconds_until_served",
            "value": round(served, 2),
            "unit": "s",
            "workload": workload,
            "note": "merge commit -> every agent fetched the new artifact",
        },
        {
            "figure": "seconds_until_in_sync",
            "value": round(applied, 2),
            "unit": "s",
            "workload": workload,
            "note": "merge commit -> every heartbeat proves it applied "
            f"({applied / interval:.2f} watch intervals)",
        },
        *(
            {
                "figure": f"{name}_cpu_us_per_request",
                "value": value,
                "unit": "us",
                "workload": workload,
                "note": f"{name} CPU time per request completed, steady state{cores}",
            }
            for name, value in zip(("server", "simulator", "postgres"), per_request, strict=True)
        ),
        {
            "goals": {
                "p99_ms<50": max((float(w["p99_ms"]) for w in steady), default=0.0) < 50,
                "in_sync<=2_intervals": applied <= 2 * interval,
            }
        },
    ]
