"""The request guard: bodies bounded while they stream in (413 before an oversize body is read),
JSON and form bodies refused with a 422 naming the field when PostgreSQL could not store them
or they nest too deep, bad text in the path or query refused, accepted bodies replayed intact;
and under real granian, a 100 MiB body and a chunked one refused without the worker growing."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI, Request
from hypothesis import given, settings
from hypothesis import strategies as st
from platformkit import boundedjson
from platformkit.http import (
    DEFAULT_BODY_LIMIT,
    ContentTooLarge,
    ProblemError,
    Server,
    ValidationFailed,
    create_app,
    install,
    start_server,
)
from platformkit.storable import find_unstorable
from platformkit.testing.oversize import MIB, chunked, send_body, tree_rss_kb
from platformkit.testing.services import free_port
from pydantic import BaseModel
from starlette.applications import Starlette
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

HERE = Path(__file__).parent
TARGET = f"{Path(__file__).stem}:make_app"


class Login(BaseModel):
    username: str
    password: str


def make_app() -> FastAPI:
    """The app of these tests; granian imports it in its worker (this module is on its path)."""
    app = create_app(
        title="guard-test",
        version="1",
        body_limits={"/uploads": 8 << 20, "/items/{item_id}/raw": 2048, "/streamed": None},
        json_guard_exempt=["/ingest"],
    )
    seen: list[Any] = []
    app.state.seen = seen

    @app.post("/login")
    async def login(body: Login) -> Response:
        return JSONResponse({"detail": "wrong"}, status_code=401)

    @app.post("/items")
    async def create(request: Request) -> dict[str, Any]:
        raw = await request.body()
        seen.append(raw)
        return {"length": len(raw)}

    @app.get("/items")
    async def search(q: str = "") -> dict[str, str]:
        return {"q": q}

    @app.get("/items/{item_id}")
    async def get_item(item_id: str) -> dict[str, str]:
        return {"id": item_id}

    async def raw_body(request: Request) -> Response:
        """A plain route that reads the stream itself."""
        size = 0
        async for chunk in request.stream():
            size += len(chunk)
        return JSONResponse({"length": size})

    app.add_route("/uploads", raw_body, methods=["POST"])
    app.add_route("/items/{item_id}/raw", raw_body, methods=["POST"])
    app.add_route("/streamed", raw_body, methods=["POST"])
    app.add_route("/ingest", raw_body, methods=["POST"])
    app.add_route("/raw", raw_body, methods=["POST"])

    return app


@pytest.fixture
async def client() -> Any:
    app = make_app()
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as c:
        c.app = app  # type: ignore[attr-defined]
        yield c


def field_of(response: httpx.Response) -> str:
    assert response.status_code == 422, response.text
    body = response.json()
    assert body["code"] == "validation_failed"
    assert response.headers["content-type"] == "application/problem+json"
    [error] = body["errors"]
    assert set(error) == {"field", "loc", "msg", "type"}
    return str(error["field"])


async def test_declared_length_over_the_limit_is_413_before_reading(client: Any) -> None:
    received = 0

    async def body() -> Any:
        nonlocal received
        for _ in range(4):
            received += 1
            yield b"x" * (DEFAULT_BODY_LIMIT // 2)

    headers = {"content-length": str(2 * DEFAULT_BODY_LIMIT), "content-type": "application/json"}
    r = await client.post("/login", content=body(), headers=headers)
    assert r.status_code == 413
    problem = r.json()
    assert problem["code"] == "content_too_large"
    assert problem["type"] == "urn:problem:content_too_large"
    assert problem["limit"] == DEFAULT_BODY_LIMIT
    assert set(problem) == {"type", "title", "status", "detail", "code", "instance", "request_id",
                            "limit"}  # fmt: skip
    assert client.app.state.seen == []


@pytest.mark.parametrize("content_type", ["application/json", "application/octet-stream"])
async def test_a_streamed_body_is_refused_once_it_passes_the_limit(
    client: Any, content_type: str
) -> None:
    sent = 0

    async def chunks() -> Any:  # no Content-Length: sent chunked
        nonlocal sent
        for _ in range(64):
            sent += 1
            yield b"7" * 65536

    r = await client.post("/items", content=chunks(), headers={"content-type": content_type})
    assert r.status_code == 413, r.text
    assert r.json()["code"] == "content_too_large"
    assert client.app.state.seen == []  # the app never had the whole body


async def test_route_limits_by_longest_prefix(client: Any) -> None:
    assert (await client.post("/uploads", content=b"x" * (3 << 20))).json() == {"length": 3 << 20}
    assert (await client.post("/raw", content=b"x" * (3 << 20))).status_code == 413
    assert (await client.post("/items/7/raw", content=b"x" * 2048)).status_code == 200
    r = await client.post("/items/7/raw", content=b"x" * 2049)
    assert (r.status_code, r.json()["limit"]) == (413, 2048)
    # None: the route bounds its body itself
    assert (await client.post("/streamed", content=b"x" * (3 << 20))).status_code == 200


async def test_accepted_bodies_are_replayed_unchanged(client: Any) -> None:
    bodies = [
        json.dumps({"name": "ok", "n": 12, "emoji": "\U0001f600", "pair": "\\ud83d\\ude00"}),
        '{"digits": "12345678901234567890", "text": "release2024 1e5"}',  # false alarms
        '{"big": 9223372036854775807, "small": -9223372036854775808}',
        "",
    ]
    for raw in bodies:
        r = await client.post("/items", content=raw, headers={"content-type": "application/json"})
        assert r.status_code == 200, (raw, r.text)
    assert client.app.state.seen == [raw.encode() for raw in bodies]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ('{"name": "a\\u0000b"}', "name"),
        ('{"team": {"members": [{"email": "x"}, {"email": "\\u0000"}]}}', "team.members.1.email"),
        ('{"a\\u0000": 1}', "a\ufffd"),
        ('{"label": "\\ud800"}', "label"),
        ('{"retry_count": 1180591620717411303424}', "retry_count"),
        ('{"ratio": 1e400}', "ratio"),
        ('{"ratio": NaN}', "ratio"),
    ],
)
async def test_unstorable_json_is_422_naming_the_field(client: Any, body: str, field: str) -> None:
    for content_type in ("application/json", "application/merge-patch+json; charset=utf-8"):
        r = await client.post("/items", content=body, headers={"content-type": content_type})
        assert field_of(r) == field
    error = r.json()["errors"][0]
    assert error["loc"][0] == "body"
    assert "\x00" not in r.text  # the input is not echoed
    assert "\\u0000" not in r.text
    assert client.app.state.seen == []


async def test_raw_surrogates_and_bad_utf8_in_json(client: Any) -> None:
    surrogate = b'{"name": "\xed\xa0\x80"}'  # json.loads lets an encoded surrogate through
    r = await client.post("/items", content=surrogate, headers={"content-type": "application/json"})
    assert field_of(r) == "name"
    r = await client.post(
        "/items", content=b'{"name": "\xff"}', headers={"content-type": "application/json"}
    )
    assert r.status_code == 422
    assert r.json()["errors"][0]["type"] == "json_invalid"
    utf16 = '{"name": "x\\u0000"}'.encode("utf-16")
    r = await client.post("/items", content=utf16, headers={"content-type": "application/json"})
    assert field_of(r) == "name"


async def test_deep_json_is_422_without_recursion(client: Any) -> None:
    for depth in (65, 5000, 100_000):
        body = "[" * depth + "]" * depth
        r = await client.post("/items", content=body, headers={"content-type": "application/json"})
        assert r.status_code == 422
        assert r.json()["errors"][0]["msg"] == "nested deeper than 64 levels"
    ok = "[" * 64 + "]" * 64
    r = await client.post("/items", content=ok, headers={"content-type": "application/json"})
    assert r.status_code == 200


async def test_exempt_prefixes_only_get_the_size_limit(client: Any) -> None:
    body = '{"events": [{"name": "\\u0000"}]}'
    r = await client.post("/ingest", content=body, headers={"content-type": "application/json"})
    assert r.status_code == 200
    r = await client.post(
        "/ingest", content=b"x" * (DEFAULT_BODY_LIMIT + 1), headers={"content-type": "text/plain"}
    )
    assert r.status_code == 413


async def test_query_and_path_text(client: Any) -> None:
    assert (await client.get("/items", params={"q": "fine é"})).json() == {"q": "fine é"}
    r = await client.get("/items?q=a%00b")
    assert field_of(r) == "q"
    assert r.json()["errors"][0]["loc"] == ["query", "q"]
    assert field_of(await client.get("/items?q=%ff")) == "q"
    assert field_of(await client.get("/items?q=%ed%a0%80")) == "q"
    assert field_of(await client.get("/items?other=1&name=x%00")) == "name"
    r = await client.get("/items/a%00b")
    assert field_of(r) == "item_id"
    assert r.json()["errors"][0]["loc"] == ["path", "item_id"]
    assert field_of(await client.get("/items/%ff")) == "item_id"
    assert field_of(await client.get("/nowhere/%00")) == "path"


async def test_form_bodies_are_checked_as_queries(client: Any) -> None:
    form = {"content-type": "application/x-www-form-urlencoded"}
    assert (await client.post("/items", content=b"name=ok+fine", headers=form)).status_code == 200
    assert field_of(await client.post("/items", content=b"name=a%00", headers=form)) == "name"


async def test_a_system_renders_the_guard_problems_its_own_way() -> None:
    class Refused(ProblemError):
        code, status, title = "X-1", 400, "Refused"
        type_base = "https://errors.example/"

    def translate(error: ProblemError) -> ProblemError:
        if isinstance(error, ContentTooLarge):
            return Refused("too big", limit=error.data["limit"])
        assert isinstance(error, ValidationFailed)
        return Refused("bad", fields=[e["field"] for e in error.data["errors"]])

    async def echo(request: Request) -> Response:
        return Response(await request.body())

    app = Starlette(routes=[Route("/echo", echo, methods=["POST"])])
    install(app, body_limit=10, guard_problem=translate)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as c:
        r = await c.post("/echo", content=b"x" * 11)
        assert (r.status_code, r.json()["code"], r.json()["limit"]) == (400, "X-1", 10)
        r = await c.post("/echo?q=%00")
        assert (r.json()["type"], r.json()["fields"]) == ("https://errors.example/X-1", ["q"])
        assert (await c.post("/echo", content=b"x" * 10)).content == b"x" * 10


text_chars = st.characters(exclude_categories=())  # lone surrogates and NUL included
json_leaves = (
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(text_chars, max_size=8)
)
json_values = st.recursive(
    json_leaves,
    lambda children: (
        st.lists(children, max_size=3)
        | st.dictionaries(st.text(text_chars, max_size=4), children, max_size=3)
    ),
    max_leaves=12,
)


@settings(max_examples=150, deadline=None)
@given(json_values)
def test_the_screen_never_misses_what_the_walk_finds(value: Any) -> None:
    for raw in (json.dumps(value), json.dumps(value, ensure_ascii=False)):
        data = raw.encode("utf-8", "surrogatepass")
        if find_unstorable(json.loads(data)) is not None:
            assert boundedjson.may_hold_unstorable(data), raw


# Under real granian: the server's memory while a 100 MiB body is refused.


@pytest.fixture(scope="module")
def served() -> Iterator[Server]:
    server = start_server(
        TARGET, port=free_port(), factory=True, working_dir=HERE, log_level="warning"
    )
    try:
        server.wait_ready(60)
        yield server
    finally:
        server.stop()


def test_a_100_mib_login_body_is_refused_without_the_worker_growing(served: Server) -> None:
    total = 100 * MIB
    httpx.get(f"http://{served.host}:{served.port}/healthz")  # a worker that served once
    before = tree_rss_kb(served.process.pid)
    head = (
        f"POST /login HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\n"
        f"Content-Length: {total}\r\n\r\n"
    )
    answer = send_body(served.host, served.port, head, [b" " * MIB] * 100)
    assert answer.status == 413
    assert b'"code":"content_too_large"' in answer.head
    assert answer.sent < total
    assert tree_rss_kb(served.process.pid) - before < 8 * 1024


def test_a_chunked_body_is_refused_as_it_passes_the_limit(served: Server) -> None:
    before = tree_rss_kb(served.process.pid)
    head = (
        "POST /raw HTTP/1.1\r\nHost: test\r\nContent-Type: application/octet-stream\r\n"
        "Transfer-Encoding: chunked\r\n\r\n"
    )
    answer = send_body(served.host, served.port, head, chunked(100 * MIB))
    assert answer.status == 413
    assert b'"code":"content_too_large"' in answer.head
    assert answer.sent < 100 * MIB
    assert tree_rss_kb(served.process.pid) - before < 8 * 1024


async def test_multipart_fields_are_checked_and_uploads_refused(client: Any) -> None:
    fields = {"name": (None, "ok"), "note": (None, "filename is just a word here, é")}
    assert (await client.post("/items", files=fields)).status_code == 200
    assert field_of(await client.post("/items", files={**fields, "note": (None, "a\x00b")})) == (
        "note"
    )
    nul_name = b'--b\r\nContent-Disposition: form-data; name="a\x00"\r\n\r\nx\r\n--b--\r\n'
    multipart = {"content-type": "multipart/form-data; boundary=b"}
    assert field_of(await client.post("/items", content=nul_name, headers=multipart)) == "a\x00"
    bad_utf8 = await client.post("/items", files={**fields, "name": (None, b"\xff\xfe")})
    assert field_of(bad_utf8) == "name"
    assert bad_utf8.json()["errors"][0]["msg"] == "value is not valid UTF-8"
    upload = await client.post("/items", files={**fields, "doc": ("x.txt", b"x", "text/plain")})
    assert field_of(upload) == "doc"
    assert "takes no files" in upload.json()["errors"][0]["msg"]
    # NUL outside every part (here in a part's headers) refuses the whole body
    raw = b'--b\r\nContent-Disposition: form-data; name="x"\r\nX-Junk: \x00\r\n\r\n--b--\r\n'
    assert field_of(await client.post("/items", content=raw, headers=multipart)) == "body"
    # a streaming route is still left to bound and read its own body
    streamed = await client.post("/streamed", files={"a": (None, "a\x00b")})
    assert streamed.status_code == 200
