"""JSON logs: one object per line, the request id on each, an access line, no credentials."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest
from fastapi import Request
from platformkit.http import configure_logging, create_app
from platformkit.http.logs import redact
from prometheus_client import CollectorRegistry

TOKEN = "pk_live_0123456789abcdef"
log = logging.getLogger("shop.api")


@pytest.fixture
def stream() -> Iterator[io.StringIO]:
    out = io.StringIO()
    root = logging.getLogger()
    level = root.level
    handler = configure_logging("DEBUG", stream=out)
    yield out
    root.removeHandler(handler)
    root.setLevel(level)


def lines(stream: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]


@pytest.fixture
async def client() -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(title="logs", version="1", registry=CollectorRegistry())

    @app.post("/orders/{order_id}/pay")
    async def pay(order_id: int, request: Request) -> dict[str, bool]:
        # A careless handler: the formatter still keeps the credentials out.
        log.info(
            "paying with %s",
            request.headers.get("authorization"),
            extra={
                "order_id": order_id,
                "headers": dict(request.headers),
                "api_key": TOKEN,
                "nested": {"refresh_token": TOKEN, "ok": 1},
            },
        )
        return {"paid": True}

    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as c:
        yield c


async def test_lines_are_json_with_request_id_and_access_fields(
    client: httpx.AsyncClient, stream: io.StringIO
) -> None:
    r = await client.post("/orders/7/pay?coupon=SAVE", headers={"X-Request-ID": "req-1"})
    assert r.status_code == 200
    records = lines(stream)
    app_line = next(x for x in records if x["logger"] == "shop.api")
    assert app_line["request_id"] == "req-1"
    assert app_line["level"] == "info"
    assert app_line["order_id"] == 7
    assert app_line["ts"].endswith("Z")
    access = next(x for x in records if x["logger"] == "platformkit.http.access")
    assert {k: access[k] for k in ("method", "route", "status", "request_id")} == {
        "method": "POST",
        "route": "/orders/{order_id}/pay",
        "status": 200,
        "request_id": "req-1",
    }
    assert access["msg"] == "POST /orders/{order_id}/pay 200"
    assert isinstance(access["duration_ms"], float)
    server_lines = [x for x in records if x["logger"].startswith("platformkit")]
    assert "SAVE" not in json.dumps(server_lines)  # no query strings in access lines


async def test_no_authorization_cookie_or_token_value_is_logged(
    client: httpx.AsyncClient, stream: io.StringIO
) -> None:
    await client.post(
        "/orders/1/pay",
        headers={"Authorization": f"Bearer {TOKEN}", "Cookie": f"session={TOKEN}"},
    )
    text = stream.getvalue()
    assert TOKEN not in text
    app_line = next(x for x in lines(stream) if x["logger"] == "shop.api")
    assert app_line["msg"] == "paying with Bearer [redacted]"
    assert app_line["headers"]["authorization"] == "[redacted]"
    assert app_line["headers"]["cookie"] == "[redacted]"
    assert app_line["api_key"] == "[redacted]"
    assert app_line["nested"] == {"refresh_token": "[redacted]", "ok": 1}


def test_redact_handles_header_pairs_and_bytes() -> None:
    headers = [(b"authorization", b"Basic dXNlcjpwYXNz"), (b"accept", b"*/*")]
    assert redact("headers", headers) == [["authorization", "[redacted]"], ["accept", "*/*"]]
    assert redact("note", "token Bearer abc.def") == "token Bearer [redacted]"


def test_outside_requests_lines_have_no_request_id(stream: io.StringIO) -> None:
    try:
        raise ValueError("bad")
    except ValueError:
        log.exception("failed")
    [line] = lines(stream)
    assert "request_id" not in line
    assert line["level"] == "error"
    assert "ValueError: bad" in line["exc"]


def test_text_format(stream: io.StringIO) -> None:
    out = io.StringIO()
    handler = configure_logging("INFO", json=False, stream=out)
    try:
        log.info("hello")
    finally:
        logging.getLogger().removeHandler(handler)
    assert out.getvalue().rstrip().endswith("INFO shop.api [None] hello")
    assert stream.getvalue() == ""  # the JSON handler was replaced, not doubled
