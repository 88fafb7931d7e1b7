"""Request ids: echoed when sane, generated (UUIDv7) otherwise, visible to handlers."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import httpx
import pytest
from platformkit.http import create_app, current_request_id
from prometheus_client import CollectorRegistry


@pytest.fixture
async def client() -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(title="ids", version="1", registry=CollectorRegistry())

    @app.get("/whoami")
    async def whoami() -> dict[str, str | None]:
        return {"request_id": current_request_id()}

    @app.get("/sync")
    def in_thread() -> dict[str, str | None]:
        return {"request_id": current_request_id()}

    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as c:
        yield c


@pytest.mark.parametrize("path", ["/whoami", "/sync"])
async def test_sane_incoming_id_is_echoed_and_seen_by_the_handler(
    client: httpx.AsyncClient, path: str
) -> None:
    r = await client.get(path, headers={"X-Request-ID": "lb-7f3a.9:trace/1"})
    assert r.headers["x-request-id"] == "lb-7f3a.9:trace/1"
    assert r.json() == {"request_id": "lb-7f3a.9:trace/1"}


async def test_missing_id_is_generated_as_uuid7(client: httpx.AsyncClient) -> None:
    r = await client.get("/whoami")
    generated = uuid.UUID(r.headers["x-request-id"])
    assert generated.version == 7
    assert r.json() == {"request_id": str(generated)}
    assert current_request_id() is None  # nothing leaks out of the request


@pytest.mark.parametrize(
    "bad", ["x" * 129, "has space", 'quote"d', "-leading-dash", "new\\nline", "caf\u00e9"]
)
async def test_insane_incoming_id_is_replaced(client: httpx.AsyncClient, bad: str) -> None:
    r = await client.get("/whoami", headers={b"X-Request-ID": bad.encode("utf-8")})
    assert r.headers["x-request-id"] != bad
    assert uuid.UUID(r.headers["x-request-id"]).version == 7
    assert r.headers.get_list("x-request-id") == [r.json()["request_id"]]


async def test_longest_sane_id_is_kept(client: httpx.AsyncClient) -> None:
    sane = "a" * 128
    assert (await client.get("/whoami", headers={"X-Request-ID": sane})).headers[
        "x-request-id"
    ] == sane
