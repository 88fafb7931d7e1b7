"""problem+json: one shape for system errors, validation, routing errors and crashes."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from platformkit.http import ProblemError, configure_logging, create_app, install
from prometheus_client import CollectorRegistry
from pydantic import BaseModel, Field
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

PROBLEM = "application/problem+json"


class ShopError(ProblemError):
    type_base = "https://errors.example.test/"


class OutOfStock(ShopError):
    code = "item.out_of_stock"
    status = 409
    title = "Item out of stock"


class SlowDown(ShopError):
    code = "AB-2001"
    status = 429
    title = "Too many requests"


class NewItem(BaseModel):
    name: str = Field(min_length=1)
    price: int
    password: str | None = None


def build_app() -> FastAPI:
    app = create_app(title="shop", version="1.0", registry=CollectorRegistry())

    @app.get("/items/{item_id}")
    async def get_item(item_id: int) -> dict[str, Any]:
        raise OutOfStock(f"item {item_id} has none left", item_id=item_id, available=0)

    @app.get("/limited")
    async def limited() -> None:
        raise SlowDown(headers={"Retry-After": "7"})

    @app.post("/items", status_code=201)
    async def create_item(item: NewItem) -> dict[str, Any]:
        return item.model_dump()

    @app.get("/crash")
    async def crash() -> None:
        raise RuntimeError("connect failed: password=hunter2 in /srv/app/settings.py")

    @app.get("/stream-crash")
    async def stream_crash() -> StreamingResponse:
        async def chunks() -> AsyncIterator[bytes]:
            yield b"partial"
            raise RuntimeError("mid-stream")

        return StreamingResponse(chunks())

    return app


@pytest.fixture
def log_lines() -> Iterator[io.StringIO]:
    stream = io.StringIO()
    root = logging.getLogger()
    level = root.level
    handler = configure_logging("INFO", stream=stream)
    yield stream
    root.removeHandler(handler)
    root.setLevel(level)


@pytest.fixture
async def client() -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=build_app())
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as c:
        yield c


async def test_system_error_is_rendered_as_problem_json(client: httpx.AsyncClient) -> None:
    r = await client.get("/items/42?secret=x")
    assert r.status_code == 409
    assert r.headers["content-type"] == PROBLEM
    assert r.json() == {
        "type": "https://errors.example.test/item.out_of_stock",
        "title": "Item out of stock",
        "status": 409,
        "detail": "item 42 has none left",
        "code": "item.out_of_stock",
        "instance": "/items/42",
        "request_id": r.headers["x-request-id"],
        "item_id": 42,
        "available": 0,
    }


async def test_problem_headers_and_codes_without_detail(client: httpx.AsyncClient) -> None:
    r = await client.get("/limited")
    assert r.status_code == 429
    assert r.headers["retry-after"] == "7"
    body = r.json()
    assert body["code"] == "AB-2001"
    assert "detail" not in body


async def test_unexpected_exception_is_500_without_internals(
    client: httpx.AsyncClient, log_lines: io.StringIO
) -> None:
    r = await client.get("/crash")
    assert r.status_code == 500
    assert r.headers["content-type"] == PROBLEM
    body = r.json()
    assert body["code"] == "internal"
    assert body["type"] == "urn:problem:internal"
    assert set(body) == {"type", "title", "status", "code", "instance", "request_id"}
    for leak in ("hunter2", "RuntimeError", "Traceback", "settings.py"):
        assert leak not in r.text
    errors = [json.loads(line) for line in log_lines.getvalue().splitlines()]
    [error] = [e for e in errors if e["level"] == "error"]
    assert error["request_id"] == r.headers["x-request-id"]
    assert "RuntimeError" in error["exc"]
    assert error["msg"] == "unhandled error in GET /crash"


async def test_crash_mid_response_is_logged_and_reaches_the_server(
    client: httpx.AsyncClient, log_lines: io.StringIO
) -> None:
    # The status line is gone already: the server must see the failure and drop the connection.
    with pytest.raises(RuntimeError, match="mid-stream"):
        await client.get("/stream-crash")
    records = [json.loads(line) for line in log_lines.getvalue().splitlines()]
    [error] = [e for e in records if e["level"] == "error"]
    assert error["msg"] == "unhandled error in GET /stream-crash"
    assert error["request_id"]


async def test_validation_error_lists_each_field_without_echoing_input(
    client: httpx.AsyncClient,
) -> None:
    r = await client.post("/items", json={"name": "", "price": "cheap", "password": 5})
    assert r.status_code == 422
    assert r.headers["content-type"] == PROBLEM
    body = r.json()
    assert body["code"] == "validation_failed"
    assert body["status"] == 422
    fields = {e["field"]: e for e in body["errors"]}
    assert set(fields) == {"name", "price", "password"}
    assert fields["price"]["loc"] == ["body", "price"]
    assert fields["price"]["type"] == "int_parsing"
    assert all(set(e) == {"field", "loc", "msg", "type"} for e in body["errors"])
    assert "cheap" not in r.text


async def test_routing_errors_are_problems(client: httpx.AsyncClient) -> None:
    missing = await client.get("/nowhere")
    assert missing.status_code == 404
    assert missing.headers["content-type"] == PROBLEM
    assert missing.json()["code"] == "not_found"
    assert missing.json()["instance"] == "/nowhere"
    wrong = await client.delete("/crash")
    assert wrong.status_code == 405
    assert wrong.json()["code"] == "method_not_allowed"
    assert wrong.headers["allow"] == "GET"


async def test_openapi_documents_problems_not_fastapi_validation_shape(
    client: httpx.AsyncClient,
) -> None:
    spec = (await client.get("/openapi.json")).json()
    responses = spec["paths"]["/items"]["post"]["responses"]
    assert set(responses) == {"201", "4XX", "5XX"}
    assert PROBLEM in responses["4XX"]["content"]
    assert "HTTPValidationError" not in spec.get("components", {}).get("schemas", {})
    assert "/healthz" not in spec["paths"]


async def test_plain_starlette_app_gets_the_same_handling() -> None:
    async def heartbeat(request: Request) -> Response:
        raise OutOfStock("no", agent=request.path_params["agent_id"])

    app = Starlette(routes=[Route("/agents/{agent_id}/heartbeat", heartbeat, methods=["POST"])])
    install(app, registry=CollectorRegistry())
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as c:
        r = await c.post("/agents/a1/heartbeat")
        assert r.status_code == 409
        assert r.json()["agent"] == "a1"
        assert "x-request-id" in r.headers
        assert (await c.get("/nope")).json()["code"] == "not_found"
        assert (await c.get("/healthz")).json() == {"status": "ok"}


def test_error_classes_are_checked() -> None:
    with pytest.raises(ValueError, match="reserved"):
        OutOfStock(status=1)
    with pytest.raises(TypeError, match="HTTP error status"):
        type("Bad", (ProblemError,), {"code": "x", "status": 200, "title": "x"})
