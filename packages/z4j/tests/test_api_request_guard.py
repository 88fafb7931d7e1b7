"""The kernel's request guard on the brain: NUL in an agent name, a project name, a user's
email or the task list's ``q`` and ``name`` parameters is a 422 naming the field, and nothing
is stored; under the real server a 100 MiB sign-in body is refused with 413 before it is read."""

from __future__ import annotations

import psycopg
import pytest
from platformkit.testing.oversize import MIB, send_body, tree_rss_kb
from z4j.testing import BrainProcess

from .conftest import Seed

NUL = "a\u0000b"


def _count(url: str, table: str) -> int:
    with psycopg.connect(url) as conn:
        row = conn.execute(f"SELECT count(*) FROM {table}").fetchone()
    return int(row[0]) if row else 0


async def test_nul_in_names_and_emails_is_422_naming_the_field(
    seed: Seed, z4j_database: str
) -> None:
    admin = await seed.user("root@example.com", is_admin=True)
    project = await seed.project(admin)
    cases = [
        (f"/api/v1/projects/{project}/agents", {"name": NUL}, "name", "agents"),
        ("/api/v1/projects", {"name": NUL}, "name", "projects"),
        ("/api/v1/users", {"email": f"{NUL}@example.com", "password": "x" * 16}, "email", "users"),
        (f"/api/v1/projects/{project}/members", {"email": NUL, "role": "viewer"}, "email",
         "memberships"),
    ]  # fmt: skip
    async with seed.signed_in("root@example.com") as http:
        for path, body, field, table in cases:
            before = _count(z4j_database, table)
            answer = await http.post(path, json=body)
            assert answer.status_code == 422, (path, answer.text)
            assert answer.json()["code"] == "validation_failed"
            assert [e["field"] for e in answer.json()["errors"]] == [field]
            assert _count(z4j_database, table) == before
        answer = await http.post("/api/v1/auth/login", json={"email": NUL, "password": "x"})
        assert [e["field"] for e in answer.json()["errors"]] == ["email"]


@pytest.mark.parametrize("param", ["q", "name", "queue"])
async def test_nul_in_the_task_list_query_names_the_parameter(seed: Seed, param: str) -> None:
    owner = await seed.user("own@example.com")
    project = await seed.project(owner)
    async with seed.signed_in("own@example.com") as http:
        answer = await http.get(f"/api/v1/projects/{project}/tasks?{param}=x%00y")
        assert answer.status_code == 422, answer.text
        assert answer.json()["errors"][0]["loc"] == ["query", param]
        answer = await http.get(f"/api/v1/projects/{project}/tasks?{param}=%ff")
        assert answer.json()["errors"][0]["loc"] == ["query", param]


async def test_the_dashboards_pages_get_the_error_page(seed: Seed) -> None:
    """The guard's refusal of a page's request is the dashboard's error page, not JSON; the
    API's stays problem+json. Sign-in posted as multipart with NUL in a field, or with a file,
    is refused alike."""
    owner = await seed.user("page@example.com")
    project = await seed.project(owner)
    async with seed.signed_in("page@example.com") as http:
        form = await http.post("/login", data={"email": NUL, "password": "x"})
        multipart = await http.post("/login", files={"email": (None, NUL), "password": (None, "x")})
        upload = await http.post("/login", files={"email": ("e.txt", b"x", "text/plain")})
        page = await http.get(f"/projects/{project}/tasks?q=x%00y")
        api = await http.get(f"/api/v1/projects/{project}/tasks?q=x%00y")
    for answer in (form, multipart, upload, page):
        assert answer.status_code == 422, answer.text
        assert answer.headers["content-type"].startswith("text/html")
        assert "<html" in answer.text.lower()
    assert api.headers["content-type"] == "application/problem+json"


def test_a_100_mib_sign_in_body_is_refused_before_it_is_read(brain_server: BrainProcess) -> None:
    assert brain_server.proc is not None
    before = tree_rss_kb(brain_server.proc.pid)
    total = 100 * MIB
    head = (
        "POST /api/v1/auth/login HTTP/1.1\r\nHost: z4j\r\nContent-Type: application/json\r\n"
        f"Content-Length: {total}\r\n\r\n"
    )
    answer = send_body("127.0.0.1", brain_server.port, head, [b" " * MIB] * 100)
    assert answer.status == 413
    assert b'"code":"content_too_large"' in answer.head
    assert answer.sent < total
    assert tree_rss_kb(brain_server.proc.pid) - before < 8 * 1024
