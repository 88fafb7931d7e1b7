"""``strataplane bench fleet``: the fleet loop under load, measured from outside the server.

The server runs under granian in its own process on a fresh database; the simulated fleet runs
in another process (``strataplane simulate telegraf``, or ``vector`` with ``--kind vector``);
this process seeds the tenant and the fleet, reads the simulator's windows and watches the
database. Figures:

- ``polls_per_sec`` and ``p99_ms``: requests the simulator completed per second (HEAD polls,
  heartbeats, GETs) and their 99th percentile latency, in steady state;
- ``render_seconds``: from the merge's commit (a new revision changing every agent's
  configuration) until every agent's desired artifact is rendered;
- ``seconds_until_served``, ``seconds_until_in_sync``: from the merge's commit until every
  agent fetched it, and until every agent applied it (proved by its heartbeat) and is
  ``in_sync``;
- ``*_cpu_us_per_request``: CPU time of the server (granian and its workers), the simulator
  and the database's PostgreSQL backends over the steady-state windows, per request
  completed, with the cores each used: on a shared machine the steadier figure.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
from platformkit.http.serve import child_preexec

from strataplane import db

GROUPS = 50
DATABASE = "strataplane_bench"


def spec_files(heartbeat_interval: float, percpu: str, kind: str = "telegraf") -> dict[str, str]:
    """The bench's tree: a base Layer and a Route, and one Layer per label set; ``percpu``
    "true" or "false" changes every agent's configuration."""
    every = f"{max(1, round(heartbeat_interval * 1000))}ms"
    if kind == "vector":
        return _vector_files(every, percpu)
    if kind == "elastic-agent":
        return _elastic_files(percpu)
    files = {
        "settings.toml": f'owner = "platform"\n\n[telegraf.heartbeat]\ninterval = "{every}"\n',
        "routes/influx.toml": 'agentKind = "telegraf"\nowner = "platform"\n\n'
        '[config.outputs.influxdb_v2.main]\nurls = ["https://influx.example.com"]\n',
        "layers/base.toml": 'agentKind = "telegraf"\nowner = "platform"\nroutes = ["influx"]\n\n'
        f"[config.inputs.cpu.default]\npercpu = {percpu}\n",
    }
    for g in range(GROUPS):
        files[f"layers/group-{g:02d}.toml"] = (
            f'agentKind = "telegraf"\nowner = "platform"\nprecedence = 100\n\n'
            f'[config.global_tags]\ngroup = "g{g:02d}"\n\n'
            f'[selector.matchLabels]\ngroup = "g{g:02d}"\n'
        )
    return files


def _vector_files(every: str, percpu: str) -> dict[str, str]:
    head = 'agentKind = "vector"\nowner = "platform"\n'
    files = {
        "settings.toml": f'owner = "platform"\n\n[vector.heartbeat]\ninterval = "{every}"\n',
        "routes/out.toml": f'{head}\n[config.sinks.out]\ntype = "console"\ninputs = ["tag"]\n'
        'encoding = { codec = "json" }\n',
        "layers/base.toml": f'{head}routes = ["out"]\n\n[config.sources.app]\ntype = "file"\n'
        f'include = ["/var/log/app/{percpu}.log"]\n\n[config.transforms.tag]\ntype = "remap"\n'
        'inputs = ["app"]\nsource = ".group = \\"none\\""\n',
    }
    for g in range(GROUPS):
        files[f"layers/group-{g:02d}.toml"] = (
            f'{head}precedence = 100\n\n[config.transforms.tag]\ntype = "remap"\n'
            f'inputs = ["app"]\nsource = ".group = \\"g{g:02d}\\""\n\n'
            f'[selector.matchLabels]\ngroup = "g{g:02d}"\n'
        )
    return files


def _elastic_files(percpu: str) -> dict[str, str]:
    head = 'agentKind = "elastic-agent"\nowner = "platform"\n'
    files = {
        "settings.toml": 'owner = "platform"\n',
        "routes/es.toml": f'{head}\n[config.outputs.default]\ntype = "elasticsearch"\n'
        'hosts = ["https://es.example.com:9200"]\n',
        "layers/base.toml": f'{head}routes = ["es"]\n\n[config.inputs.system-metrics]\n'
        f'type = "system/metrics"\nuse_output = "default"\nperiod = "{percpu}"\n',
    }
    for g in range(GROUPS):
        files[f"layers/group-{g:02d}.toml"] = (
            f'{head}precedence = 100\n\n[config.agent.monitoring]\nnamespace = "g{g:02d}"\n\n'
            f'[selector.matchLabels]\ngroup = "g{g:02d}"\n'
        )
    return files


def _count(url: str, sql: str, params: tuple[Any, ...]) -> int:
    with psycopg.connect(url) as conn:
        row = conn.execute(sql, params).fetchone()
    return int(row[0]) if row else 0


def wait_for(
    url: str,
    sql: str,
    params: tuple[Any, ...],
    want: int,
    timeout: float,
    stalled: Callable[[], str | None] = lambda: None,
) -> float:
    """Seconds until ``sql`` counts ``want`` rows. Raises TimeoutError, or RuntimeError as soon
    as ``stalled`` names a reason the count cannot get there."""
    started = time.monotonic()
    while (count := _count(url, sql, params)) < want:
        if (reason := stalled()) is not None:
            raise RuntimeError(reason)
        if time.monotonic() - started > timeout:
            raise TimeoutError(f"{sql} reached {count}, not {want}, in {timeout}s")
        time.sleep(0.05)
    return time.monotonic() - started


def fresh_database(configured: str | None) -> str:
    from platformkit.db.pool import with_database
    from platformkit.db.server import admin_url_for

    url = with_database(configured, DATABASE) if configured else admin_url_for(None, DATABASE)
    with psycopg.connect(with_database(url, "postgres"), autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {DATABASE} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {DATABASE}")
    asyncio.run(db.migrator().migrate(url))
    return url


def start_simulator(
    base: str,
    creds: Path,
    agents: int,
    interval: float,
    duration: float,
    connections: int,
    kind: str = "telegraf",
) -> subprocess.Popen[str]:
    every = {"vector": "--poll-interval", "elastic-agent": "--spread"}.get(kind, "--watch-interval")
    command = [
        sys.executable,
        "-m",
        "strataplane.cli",
        "simulate",
        kind,
        "--url",
        base,
        "--credentials",
        str(creds),
        "--agents",
        str(agents),
        every,
        str(interval),
        "--duration",
        str(duration),
        "--connections",
        str(connections),
        "--report-every",
        str(interval),
    ]
    if kind == "elastic-agent":
        # the agents' fleet.checkin.request_backoff_init and _max: one interval, six at most
        # (Elastic Agent's defaults, 60 s and 10 min, would make a refused start wait minutes)
        command += ["--backoff-init", str(interval), "--backoff-max", str(6 * interval)]
    # the simulator ends with the bench, even when the bench is killed
    return subprocess.Popen(  # noqa: S603
        command, stdout=subprocess.PIPE, text=True, preexec_fn=child_preexec()
    )


def credentials_file(rows: list[tuple[Any, str, str]]) -> Path:
    handle, name = tempfile.mkstemp(prefix="sp-bench-", suffix=".json")
    os.close(handle)
    path = Path(name)
    path.write_text(json.dumps([[instance, token] for _id, instance, token in rows]))
    path.chmod(0o600)
    return path
