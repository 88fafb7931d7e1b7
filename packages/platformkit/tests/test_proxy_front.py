"""The PROXY-protocol front over real sockets, relaying to a real granian server: the header's
address becomes the last X-Forwarded-For hop of every request on a kept-alive connection, and
connections from untrusted peers or without a valid header never reach the application."""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import json
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import h11
import pytest
from fastapi import FastAPI, Request
from platformkit.http import create_app, start_server
from platformkit.http.proxy_front import FrontConfig, serve_front, start_front
from platformkit.http.proxy_protocol import encode_v1, encode_v2
from platformkit.testing.services import free_port, tcp_reachable

HERE = Path(__file__).parent
TARGET = f"{Path(__file__).stem}:make_app"


def make_app() -> FastAPI:
    """Echoes what the application sees of each request (granian imports it in its worker)."""
    app = create_app(title="front-test", version="1")

    @app.api_route("/echo", methods=["GET", "HEAD", "POST"])
    async def echo(request: Request) -> dict[str, str]:
        body = await request.body()
        return {
            "method": request.method,
            "forwarded": request.headers.get("x-forwarded-for", ""),
            "proto": ",".join(request.headers.getlist("x-forwarded-proto")),
            "body": body.decode(),
        }

    return app


@pytest.fixture(scope="module")
def upstream() -> Iterator[int]:
    port = free_port()
    server = start_server(TARGET, port=port, factory=True, working_dir=HERE)
    try:
        server.wait_ready()
        yield port
    finally:
        server.stop()


@pytest.fixture
async def front(upstream: int) -> AsyncIterator[int]:
    port = free_port()
    config = FrontConfig(
        listen=("127.0.0.1", port),
        upstream=("127.0.0.1", upstream),
        trusted=(ipaddress.ip_network("127.0.0.0/8"),),
        header_timeout=1.0,
    )
    async with await serve_front(config):
        yield port


type Call = tuple[str, list[tuple[str, str]], bytes]  # method, extra headers, body


def message(method: str, headers: list[tuple[str, str]], body: bytes) -> list[h11.Event]:
    framing = [] if method in ("GET", "HEAD") else [("content-length", str(len(body)))]
    if any(name == "transfer-encoding" for name, _ in headers):
        framing = []
    request = h11.Request(
        method=method, target="/echo", headers=[("host", "front"), *framing, *headers]
    )
    return [request, *([h11.Data(data=body)] if body else []), h11.EndOfMessage()]


type Answer = tuple[int, dict[str, str]]


async def exchange(port: int, preamble: bytes, calls: list[Call]) -> list[Answer]:
    """Send the preamble and every request at once on one connection; read the answers."""
    wire = preamble
    for call in calls:
        writer_side = h11.Connection(h11.CLIENT)
        wire += b"".join(writer_side.send(e) or b"" for e in message(*call))
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    answers: list[Answer] = []
    try:
        writer.write(wire)
        with contextlib.suppress(ConnectionError):
            await writer.drain()
        buffered, closed = b"", False
        for call in calls:
            parser = h11.Connection(h11.CLIENT)
            for event in message(*call):
                parser.send(event)
            if buffered:
                parser.receive_data(buffered)
            if closed:
                parser.receive_data(b"")
            status, body = 0, b""
            while True:
                try:
                    event = parser.next_event()
                except h11.RemoteProtocolError:  # the front closed the connection
                    return answers
                if event is h11.NEED_DATA:
                    try:
                        chunk = await asyncio.wait_for(reader.read(65536), 10)
                    except ConnectionError:
                        return answers
                    parser.receive_data(chunk)
                    continue
                if isinstance(event, h11.ConnectionClosed):
                    return answers
                if isinstance(event, h11.Response):
                    status = event.status_code
                elif isinstance(event, h11.Data):
                    body += event.data
                elif isinstance(event, h11.EndOfMessage):
                    break
            answers.append((status, json.loads(body) if body else {}))
            buffered, closed = parser.trailing_data
    finally:
        writer.close()
    return answers


@pytest.mark.parametrize("encode", [encode_v1, encode_v2], ids=["v1", "v2"])
async def test_every_request_of_a_kept_alive_connection_carries_the_proxied_address(
    front: int, encode: Callable[..., bytes]
) -> None:
    calls: list[Call] = [
        ("GET", [], b""),
        ("POST", [("x-forwarded-for", "198.51.100.7")], b'{"a": 1}'),
        ("POST", [("transfer-encoding", "chunked")], b"chunked body"),
        ("HEAD", [], b""),
        ("GET", [], b""),
    ]
    answers = await exchange(front, encode(("203.0.113.9", 40000), ("10.0.0.1", 443)), calls)
    assert [status for status, _ in answers] == [200] * 5
    assert answers[0][1] == {
        "method": "GET", "forwarded": "203.0.113.9", "proto": "http", "body": ""
    }  # fmt: skip
    # A hop the client wrote itself stays to the left, where only a trusted chain would reach.
    assert answers[1][1]["forwarded"] == "198.51.100.7, 203.0.113.9"
    assert answers[1][1]["body"] == '{"a": 1}'
    assert answers[2][1]["body"] == "chunked body"
    assert answers[3][1] == {}  # HEAD: no body
    assert answers[4][1]["forwarded"] == "203.0.113.9"


async def test_a_local_connection_adds_no_hop(front: int) -> None:
    answers = await exchange(front, encode_v2(None), [("GET", [], b"")])
    assert answers == [(200, {"method": "GET", "forwarded": "", "proto": "http", "body": ""})]


async def test_only_the_load_balancers_tls_flag_makes_the_request_https(front: int) -> None:
    """X-Forwarded-Proto is the front's alone: https when the v2 header carries PP2_TYPE_SSL
    with the client bit, http otherwise, whatever the client wrote."""
    source, claim = ("203.0.113.9", 40000), [("x-forwarded-proto", "https")]
    over_tls = await exchange(front, encode_v2(source, tls=True), [("GET", [], b"")])
    assert over_tls[0][1]["proto"] == "https"
    for preamble in (encode_v2(source), encode_v1(source)):
        [(status, seen)] = await exchange(front, preamble, [("GET", claim, b"")])
        assert (status, seen["proto"]) == (200, "http")


@pytest.mark.parametrize(
    "preamble",
    [b"", b"PROXY TCP4 1.2.3.4 5.6.7.8 80\r\n", b"PROXY TCP4 1.2.3.4"],
    ids=["no header", "malformed", "never finished"],
)
async def test_a_connection_without_a_valid_header_never_reaches_the_app(
    front: int, preamble: bytes
) -> None:
    assert await exchange(front, preamble, [("GET", [], b"")]) == []


async def test_a_peer_outside_the_trusted_networks_is_refused(upstream: int) -> None:
    port = free_port()
    config = FrontConfig(
        listen=("127.0.0.1", port),
        upstream=("127.0.0.1", upstream),
        trusted=(ipaddress.ip_network("10.0.0.0/8"),),
    )
    async with await serve_front(config):
        preamble = encode_v1(("203.0.113.9", 40000))
        assert await exchange(port, preamble, [("GET", [], b"")]) == []


async def test_the_front_runs_as_a_child_process(upstream: int) -> None:
    port = free_port()
    child = start_front(("127.0.0.1", port), ("127.0.0.1", upstream), ["127.0.0.1/32"])
    try:
        for _ in range(600):  # the child imports the HTTP kernel first
            if tcp_reachable("127.0.0.1", port):
                break
            await asyncio.sleep(0.05)
        answers = await exchange(port, encode_v1(("192.0.2.1", 5)), [("GET", [], b"")])
        seen = {"method": "GET", "forwarded": "192.0.2.1", "proto": "http", "body": ""}
        assert answers == [(200, seen)]
    finally:
        child.terminate()
        assert child.wait(10) == 0
