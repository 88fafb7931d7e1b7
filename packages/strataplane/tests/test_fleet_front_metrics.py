"""Agent requests are answered ahead of the API's middleware, yet still counted and timed in the
kernel's HTTP metrics, by method, endpoint path and status."""

from __future__ import annotations

from fastapi import FastAPI
from strataplane.testing import client_for

ROUTE = "/agents/telegraf/config"


def sample(text: str, name: str, method: str, status: int) -> float:
    prefix = f'{name}{{method="{method}",route="{ROUTE}",status="{status}"}} '
    return sum(float(line[len(prefix) :]) for line in text.splitlines() if line.startswith(prefix))


async def test_agent_answers_are_counted_and_timed(sp_app: FastAPI) -> None:
    async with client_for(sp_app) as client:
        before = (await client.get("/metrics")).text
        for _ in range(3):
            assert (await client.head(ROUTE)).status_code == 401
        assert (await client.delete(ROUTE)).status_code == 405
        after = (await client.get("/metrics")).text
    counted = "http_requests_total"
    timed = "http_request_duration_seconds_count"
    assert sample(after, counted, "HEAD", 401) - sample(before, counted, "HEAD", 401) == 3
    assert sample(after, timed, "HEAD", 401) - sample(before, timed, "HEAD", 401) == 3
    assert sample(after, counted, "DELETE", 405) - sample(before, counted, "DELETE", 405) == 1
