"""The audit log read through the API and the dashboard: filters, pages, the JSON Lines
export, who may read what, and the chain check shared with ``z4j audit verify``."""

from __future__ import annotations

import itertools
import json
import uuid
from datetime import UTC, datetime, timedelta

import httpx
import psycopg

from .conftest import Seed
from .hostile import form_token


async def _setup(seed: Seed) -> tuple[uuid.UUID, uuid.UUID]:
    admin = await seed.user("root@example.com", is_admin=True)
    owner = await seed.user("own@example.com")
    project = await seed.project(owner)
    other = await seed.project(admin)
    async with seed.signed_in("own@example.com") as http:
        for n in range(5):
            made = await http.post(
                f"/api/v1/projects/{project}/invitations",
                json={"email": f"p{n}@example.com", "role": "viewer"},
            )
            assert made.status_code == 201
    return project, other


async def test_filters_and_pages(seed: Seed) -> None:
    project, other = await _setup(seed)
    async with seed.signed_in("root@example.com") as http:
        everything = (await http.get("/api/v1/audit?limit=200")).json()["items"]
        assert {r["project_id"] for r in everything} >= {str(project), str(other), None}
        ids = [r["id"] for r in everything]
        assert ids == sorted(ids, reverse=True)
        page = (await http.get("/api/v1/audit?action=invitation.create&limit=2")).json()
        assert [r["action"] for r in page["items"]] == ["invitation.create"] * 2
        assert page["next_before"] == page["items"][-1]["id"]
        seen = [r["id"] for r in page["items"]]
        while page["next_before"]:
            page = (
                await http.get(
                    f"/api/v1/audit?action=invitation.create&limit=2&before={page['next_before']}"
                )
            ).json()
            seen += [r["id"] for r in page["items"]]
        assert len(seen) == len(set(seen)) == 5
        prefix = (await http.get("/api/v1/audit?action=auth.")).json()["items"]
        assert prefix
        assert all(r["action"].startswith("auth.") for r in prefix)
        by_email = (await http.get("/api/v1/audit?actor=OWN@example.com")).json()["items"]
        assert by_email
        assert {r["actor_email"] for r in by_email} == {"own@example.com"}
        by_id = (await http.get(f"/api/v1/audit?actor={by_email[0]['actor_user_id']}")).json()
        assert len(by_id["items"]) == len(by_email)
        target = by_email[0]
        one = (
            await http.get(
                f"/api/v1/audit?target_type={target['target_type']}&target_id={target['target_id']}"
            )
        ).json()["items"]
        assert target["id"] in [r["id"] for r in one]
        future = (datetime.now(UTC) + timedelta(hours=1)).isoformat()
        assert (await http.get("/api/v1/audit", params={"since": future})).json()["items"] == []
        past = (await http.get("/api/v1/audit", params={"until": future})).json()["items"]
        assert len(past) == len(everything[:50])
        scoped = (await http.get(f"/api/v1/audit?project_id={project}&limit=200")).json()
        assert {r["project_id"] for r in scoped["items"]} == {str(project)}
        for bad in ("limit=0", "limit=1180591620717411303424", "before=x", "action=a%00b",
                    "since=yesterday", "actor=" + "x" * 400):  # fmt: skip
            answer = await http.get(f"/api/v1/audit?{bad}")
            assert answer.status_code == 422, (bad, answer.text)


async def test_who_reads_what(seed: Seed) -> None:
    project, other = await _setup(seed)
    await seed.member(project, await seed.user("view@example.com"), "viewer")
    async with seed.signed_in("own@example.com") as http:
        assert (await http.get("/api/v1/audit")).status_code == 403
        mine = await http.get(f"/api/v1/projects/{project}/audit?limit=200")
        assert mine.status_code == 200
        assert {r["project_id"] for r in mine.json()["items"]} == {str(project)}
        assert (await http.get(f"/api/v1/projects/{other}/audit")).status_code == 404
        assert (await http.get("/api/v1/audit/verify")).status_code == 403
    async with seed.signed_in("view@example.com") as http:
        assert (await http.get(f"/api/v1/projects/{project}/audit")).status_code == 403
        assert (await http.get(f"/api/v1/projects/{project}/audit/export")).status_code == 403
        assert (await http.get(f"/projects/{project}/audit")).status_code == 403
        assert (await http.get("/admin/audit")).status_code == 403


async def test_export_streams_json_lines_in_chain_order(seed: Seed) -> None:
    project, _other = await _setup(seed)
    async with seed.signed_in("root@example.com") as http:
        answer = await http.get("/api/v1/audit/export")
        assert answer.status_code == 200
        assert answer.headers["content-type"].startswith("application/jsonl")
        rows = [json.loads(line) for line in answer.text.splitlines()]
        assert [r["id"] for r in rows] == sorted(r["id"] for r in rows)
        for prev, row in itertools.pairwise(rows):
            assert row["prev_row_hmac"] == prev["row_hmac"]
        total = len((await http.get("/api/v1/audit?limit=200")).json()["items"])
        assert len(rows) == total
    async with seed.signed_in("own@example.com") as http:
        answer = await http.get(f"/api/v1/projects/{project}/audit/export?action=invitation.")
        rows = [json.loads(line) for line in answer.text.splitlines()]
        assert len(rows) == 5
        assert {r["project_id"] for r in rows} == {str(project)}


async def test_the_chain_check_from_the_api_and_the_page(seed: Seed, z4j_database: str) -> None:
    _project, _other = await _setup(seed)
    async with seed.signed_in("root@example.com") as http:
        good = (await http.get("/api/v1/audit/verify")).json()
        assert good["ok"] is True
        assert good["checked"] > 5
        page = await http.get("/admin/audit")
        assert page.status_code == 200
        checked = await http.post("/admin/audit/verify", data={"csrf_token": form_token(page.text)})
        assert "Audit log intact" in checked.text
        with psycopg.connect(z4j_database) as conn:
            [(bad,)] = conn.execute(
                "SELECT id FROM audit_log WHERE action = 'invitation.create' ORDER BY id LIMIT 1"
            ).fetchall()
            conn.execute(
                'UPDATE audit_log SET details = \'{"email": "forged@example.com"}\' WHERE id = %s',
                (bad,),
            )
        broken = (await http.get("/api/v1/audit/verify")).json()
        assert broken["ok"] is False
        assert broken["bad_id"] == str(bad)
        assert broken["reason"] == "hash_mismatch"
        shown = await http.post("/admin/audit/verify", data={"csrf_token": form_token(page.text)})
        assert f"broken at row {bad}" in shown.text


async def test_the_project_page_filters(seed: Seed) -> None:
    project, _other = await _setup(seed)
    async with seed.signed_in("own@example.com") as http:
        page = await http.get(f"/projects/{project}/audit?action=invitation.")
        assert page.status_code == 200
        assert page.text.count("<code>invitation.create</code>") == 5
        assert f'href="/projects/{project}/audit"' in page.text
        bad = await http.get(f"/projects/{project}/audit?since=nonsense")
        assert bad.status_code == 422
        bad = await http.get(f"/projects/{project}/audit?target_id=" + "x" * 100)
        assert bad.status_code == 422
        nul = await http.get(f"/projects/{project}/audit?actor=a%00b")
        assert nul.status_code == 422


async def test_an_api_key_reads_its_project_log_with_admin_role(
    seed: Seed, client: httpx.AsyncClient
) -> None:
    project, _other = await _setup(seed)
    async with seed.signed_in("own@example.com") as http:
        made = await http.post(
            "/api/v1/api-keys", json={"project_id": str(project), "name": "a", "role": "viewer"}
        )
        token = made.json()["token"]
    headers = {"Authorization": f"Bearer {token}"}
    answer = await client.get(f"/api/v1/projects/{project}/audit", headers=headers)
    assert answer.status_code == 403
