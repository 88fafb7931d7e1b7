"""Liveness without I/O, readiness from registered checks (a real pool among them)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import httpx
import pytest
from fastapi import FastAPI
from platformkit.db.pool import open_pool
from platformkit.db.scope import Pool
from platformkit.http import add_readiness_check, create_app, pool_check
from prometheus_client import CollectorRegistry


@pytest.fixture
async def pool(fresh_database: str) -> AsyncIterator[Pool]:
    pool = await open_pool(fresh_database, min_size=1, max_size=2)
    yield pool
    await pool.close()


def client_for(app: FastAPI) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test")


async def test_healthz_and_readyz_with_a_database_check(pool: Pool) -> None:
    app = create_app(
        title="h",
        version="1",
        registry=CollectorRegistry(),
        readiness_checks={"database": pool_check(pool)},
    )
    async with client_for(app) as c:
        assert (await c.get("/healthz")).json() == {"status": "ok"}
        ready = await c.get("/readyz")
        assert ready.status_code == 200
        assert ready.json() == {"status": "ready", "checks": {"database": "ok"}}


async def test_failing_checks_give_503_naming_them_without_causes(pool: Pool) -> None:
    async def broker() -> None:
        raise ConnectionError("broker at 10.0.0.7:4222 refused")

    async def cache() -> bool:
        return False

    async def slow() -> None:
        await asyncio.sleep(5)

    app = create_app(
        title="h",
        version="1",
        registry=CollectorRegistry(),
        readiness_checks={"database": pool_check(lambda: pool), "broker": broker},
    )
    add_readiness_check(app, "cache", cache)
    add_readiness_check(app, "slow", slow)
    app.state.platformkit_readiness.timeout = 0.2
    async with client_for(app) as c:
        r = await c.get("/readyz")
        assert r.status_code == 503
        assert r.headers["content-type"] == "application/problem+json"
        body = r.json()
        assert body["code"] == "not_ready"
        assert body["failed"] == ["broker", "cache", "slow"]
        assert "10.0.0.7" not in r.text
        assert (await c.get("/healthz")).status_code == 200


async def test_closed_pool_is_not_ready(fresh_database: str) -> None:
    pool = await open_pool(fresh_database, min_size=1, max_size=1)
    await pool.close()
    app = create_app(
        title="h",
        version="1",
        registry=CollectorRegistry(),
        readiness_checks={"database": pool_check(pool)},
    )
    async with client_for(app) as c:
        r = await c.get("/readyz")
    assert r.status_code == 503
    assert r.json()["failed"] == ["database"]
