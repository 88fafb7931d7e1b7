"""A throwaway brain for benchmarks: its own database and config dir, the real server process."""

from __future__ import annotations

import contextlib
import shutil
import tempfile
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import psycopg
from platformkit.db.pool import with_database
from platformkit.testing.services import free_port
from psycopg import sql

from z4j import db
from z4j.testing import BrainProcess


@contextlib.asynccontextmanager
async def bench_brain(
    configured_url: str | None, workers: int = 1, env: dict[str, str] | None = None
) -> AsyncIterator[BrainProcess]:
    """Start ``z4j serve`` on a fresh database (dropped afterwards)."""
    admin = db.resolve_admin_url(configured_url)
    name = f"z4j_bench_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(with_database(admin, "postgres"), autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    root = Path(tempfile.mkdtemp(prefix="z4j-bench-"))
    server = BrainProcess(
        with_database(admin, name),
        root / "config",
        free_port(),
        root / "brain.log",
        env={"Z4J_WORKERS": str(workers), **(env or {})},
    )
    try:
        server.start()
        yield server
    finally:
        server.stop()
        with psycopg.connect(with_database(admin, "postgres"), autocommit=True) as conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )
        shutil.rmtree(root, ignore_errors=True)


def pct(values: list[float], q: float) -> float:
    """The ``q`` quantile of times in seconds, in milliseconds to two places."""
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000, 2)


async def timed(
    client: httpx.AsyncClient, url: str, params: dict[str, Any], requests: int
) -> tuple[list[float], httpx.Response]:
    """``requests`` GETs of ``url``, each timed and each required to succeed: the times in
    seconds and the last answer."""
    times = []
    for _ in range(requests):
        began = time.perf_counter()
        resp = await client.get(url, params=params)
        times.append(time.perf_counter() - began)
        resp.raise_for_status()
    return times, resp
