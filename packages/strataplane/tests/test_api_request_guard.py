"""The kernel's request guard on strataplane: NUL inside JSON is a 422 naming the field on the
management API (sign-in included) and stores nothing; under granian a 100 MiB sign-in body is
refused with 413 before it is read, without the server's memory growing."""

from __future__ import annotations

import os
from collections.abc import Iterator

import psycopg
import pytest
from fastapi import FastAPI
from platformkit.http import Server, start_server
from platformkit.testing.databases import DatabaseFactory
from platformkit.testing.oversize import MIB, chunked, send_body, tree_rss_kb
from platformkit.testing.services import free_port
from strataplane.actions import tokens
from strataplane.testing import Seed, client_for

NUL = "a\u0000b"
COUNTED = ("team", "change_set", "enrollment_token", "agent_instance", "web_session")


async def _counts(url: str) -> dict[str, int]:
    async with await psycopg.AsyncConnection.connect(url) as conn:
        counts = {}
        for table in COUNTED:
            cursor = await conn.execute(f"SELECT count(*) FROM strataplane.{table}")
            row = await cursor.fetchone()
            counts[table] = int(row[0]) if row else 0
        return counts


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("/api/v1/teams", {"slug": "ops", "display_name": NUL}, "display_name"),
        ("/api/v1/change-sets", {"title": "t", "description": NUL}, "description"),
        ("/api/v1/enrollment-tokens", {"name": "n", "labels": {"role": NUL}}, "labels.role"),
        ("/api/v1/enroll/telegraf", {"instance_id": NUL, "hostname": "web-1"}, "instance_id"),
        ("/api/v1/auth/login", {"username": NUL, "password": "x"}, "username"),
        ("/api/v1/auth/login", {"username": "u", "password": NUL}, "password"),
    ],
)
async def test_nul_in_json_is_422_naming_the_field_and_stores_nothing(
    sp_app: FastAPI, strataplane_database: str, path: str, body: object, field: str
) -> None:
    seed = Seed(sp_app.state.services)
    tenant, admin = await seed.tenant()
    token = (await tokens.create_token(seed.ctx(admin, tenant.id), "t")).plaintext
    before = await _counts(strataplane_database)
    async with client_for(sp_app, token) as http:
        answer = await http.post(path, json=body)
    assert answer.status_code == 422, answer.text
    problem = answer.json()
    assert problem["code"] == "validation_failed"
    assert [e["field"] for e in problem["errors"]] == [field]
    assert await _counts(strataplane_database) == before


async def test_bad_text_in_the_query_names_the_parameter(sp_app: FastAPI) -> None:
    seed = Seed(sp_app.state.services)
    tenant, admin = await seed.tenant()
    token = (await tokens.create_token(seed.ctx(admin, tenant.id), "t")).plaintext
    async with client_for(sp_app, token) as http:
        for query in ("state=%00", "state=%ff"):
            answer = await http.get(f"/api/v1/change-sets?{query}")
            assert answer.status_code == 422, answer.text
            assert answer.json()["errors"][0]["loc"] == ["query", "state"]


@pytest.fixture(scope="module")
def served(database_factory: DatabaseFactory, strataplane_template: str) -> Iterator[Server]:
    url = database_factory.create(strataplane_template, stem="spg")
    env = {"STRATAPLANE_DATABASE_URL": url, "STRATAPLANE_SHARDS": "2"}
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    server: Server | None = None
    try:
        server = start_server(
            "strataplane.app:create_app", port=free_port(), factory=True, log_level="warning"
        )
        server.wait_ready(60)
        yield server
    finally:
        if server is not None:
            server.stop()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        database_factory.drop(url)


def test_a_100_mib_sign_in_body_is_refused_before_it_is_read(served: Server) -> None:
    head = "POST /api/v1/auth/login HTTP/1.1\r\nHost: sp\r\nContent-Type: application/json\r\n"
    warm = send_body(served.host, served.port, head + "Content-Length: 2\r\n\r\n", [b"{}"])
    assert warm.status == 422
    before = tree_rss_kb(served.process.pid)
    total = 100 * MIB
    answer = send_body(
        served.host, served.port, head + f"Content-Length: {total}\r\n\r\n", [b" " * MIB] * 100
    )
    assert answer.status == 413
    assert b'"code":"content_too_large"' in answer.head
    assert answer.sent < total
    streamed = send_body(
        served.host, served.port, head + "Transfer-Encoding: chunked\r\n\r\n", chunked(total)
    )
    assert streamed.status == 413
    assert streamed.sent < total
    assert tree_rss_kb(served.process.pid) - before < 8 * 1024


async def test_nul_in_a_multipart_sign_in_field_is_422_naming_it(sp_app: FastAPI) -> None:
    """The guard reads multipart bodies too: NUL in a field, or a file, never reaches sign-in."""
    upload = ("p.txt", b"x", "text/plain")
    cases = [({"username": (None, NUL), "password": (None, "x")}, "username"),
             ({"username": (None, "u"), "password": upload}, "password")]  # fmt: skip
    async with client_for(sp_app) as http:
        for files, field in cases:
            answer = await http.post("/api/v1/auth/login", files=files)
            assert answer.status_code == 422, answer.text
            assert [e["loc"] for e in answer.json()["errors"]] == [["body", field]]
