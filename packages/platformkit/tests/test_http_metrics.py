"""Prometheus metrics labelled by route template, in a registry systems can add to."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest
from fastapi import APIRouter, FastAPI
from platformkit.http import create_app, http_metrics
from prometheus_client import CollectorRegistry, Counter
from prometheus_client.parser import text_string_to_metric_families
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send


@pytest.fixture
def registry() -> CollectorRegistry:
    return CollectorRegistry()


@pytest.fixture
async def client(registry: CollectorRegistry) -> AsyncIterator[httpx.AsyncClient]:
    app: FastAPI = create_app(title="m", version="1", registry=registry)
    orders = Counter("shop_orders", "Orders placed", registry=registry)

    @app.get("/items/{item_id}")
    async def item(item_id: int) -> dict[str, int]:
        return {"id": item_id}

    @app.post("/orders", status_code=201)
    async def order() -> None:
        orders.inc()

    async def beat(request: Request) -> Response:
        return PlainTextResponse("ok")

    app.mount("/agent", Starlette(routes=[Route("/{agent_id}/heartbeat", beat)]))

    async def raw(scope: Scope, receive: Receive, send: Send) -> None:
        await PlainTextResponse("raw")(scope, receive, send)

    app.mount("/raw", raw)
    app.add_route("/plain/{n}", beat)
    boxes = APIRouter()  # a plain route on an included router, which FastAPI does not record
    boxes.add_route("/boxes/{box_id}", beat, methods=["GET"])
    app.include_router(boxes, prefix="/v2")
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as c:
        yield c


def samples(text: str, name: str) -> dict[tuple[str, str, str], float]:
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == name:
                out[(s.labels["method"], s.labels["route"], s.labels["status"])] = s.value
    return out


async def test_requests_are_counted_by_route_template_not_path(client: httpx.AsyncClient) -> None:
    for item_id in (1, 2, 3):
        await client.get(f"/items/{item_id}")
    await client.get("/items/not-a-number")
    await client.get("/agent/a1/heartbeat")
    await client.get("/agent/a2/heartbeat")
    await client.get("/random/path/1")
    await client.get("/raw/any/thing")
    await client.get("/plain/9")
    await client.get("/v2/boxes/7")
    await client.get("/healthz")
    await client.request("BREW", "/items/1")
    r = await client.get("/metrics")
    assert r.headers["content-type"].startswith("text/plain")
    counts = samples(r.text, "http_requests_total")
    assert counts[("GET", "/items/{item_id}", "200")] == 3
    assert counts[("GET", "/items/{item_id}", "422")] == 1
    assert counts[("GET", "/agent/{agent_id}/heartbeat", "200")] == 2
    assert counts[("GET", "unmatched", "404")] == 1
    assert counts[("GET", "/raw/{path}", "200")] == 1
    assert counts[("GET", "/plain/{n}", "200")] == 1
    assert counts[("GET", "/v2/boxes/{box_id}", "200")] == 1
    assert counts[("GET", "/healthz", "200")] == 1
    assert counts[("other", "/items/{item_id}", "405")] == 1
    assert "/items/1" not in r.text
    assert "a1" not in r.text
    buckets = samples(r.text, "http_request_duration_seconds_count")
    assert buckets[("GET", "/items/{item_id}", "200")] == 3


async def test_a_route_added_after_requests_is_labelled_by_its_own_template(
    registry: CollectorRegistry,
) -> None:
    app: FastAPI = create_app(title="m", version="1", registry=registry)

    async def beat(request: Request) -> Response:
        return PlainTextResponse("ok")

    app.add_route("/first/{n}", beat)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as c:
        await c.get("/first/1")
        app.add_route("/second/{n}", beat)  # the same endpoint, found again under a new route
        await c.get("/second/2")
        await c.get("/first/3")
        counts = samples((await c.get("/metrics")).text, "http_requests_total")
    assert counts[("GET", "/first/{n}", "200")] == 2
    assert counts[("GET", "/second/{n}", "200")] == 1


async def test_system_metrics_share_the_registry(client: httpx.AsyncClient) -> None:
    await client.post("/orders")
    text = (await client.get("/metrics")).text
    assert "shop_orders_total 1.0" in text


def test_two_apps_on_one_registry_share_the_http_metrics(registry: CollectorRegistry) -> None:
    create_app(title="a", version="1", registry=registry)
    create_app(title="b", version="1", registry=registry)
    assert http_metrics(registry) is http_metrics(registry)
