"""Issuing commands through the API, without workers: roles, capabilities, the audit row, the
timeout sweeper, and hostile input on every new route (4xx, nothing stored). The commands'
effect on real workers is in test_commands_celery.py."""

from __future__ import annotations

import asyncio
import re
import uuid
from typing import Any

import psycopg
import pytest
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb
from z4j.testing import wait_for

from .conftest import Seed

ALL = ["retry_task", "cancel_task", "purge_queue", "rate_limit", "pool_grow", "pool_shrink",
       "restart_worker"]  # fmt: skip


def _rows(url: str, query: str, *args: Any) -> list[dict[str, Any]]:
    with psycopg.connect(url, row_factory=dict_row) as conn:
        return conn.execute(query, args).fetchall()


async def _project(seed: Seed, capabilities: list[str]) -> tuple[uuid.UUID, uuid.UUID, uuid.UUID]:
    """A project with an online agent advertising ``capabilities``, one failed task of it, and
    an operator and a viewer."""
    owner = await seed.user(f"own-{uuid.uuid4().hex[:6]}@example.com")
    project = await seed.project(owner)
    created = await seed.agent(owner, project)
    agent_id = created.agent["id"]
    with psycopg.connect(seed.admin_url) as conn:
        conn.execute(
            "UPDATE agents SET capabilities = %s, state = 'online', last_seen_at = now() "
            "WHERE id = %s",
            (Jsonb({"celery": capabilities}), agent_id),
        )
    (task,) = seed.tasks(project, [{"agent_id": agent_id, "state": "failed"}])
    for role in ("operator", "viewer"):
        await seed.member(project, await seed.user(f"{role}-{project.hex[:6]}@example.com"), role)
    return project, agent_id, task


async def test_operator_issues_viewer_is_refused_and_the_audit_row_is_written(seed: Seed) -> None:
    project, agent_id, task = await _project(seed, ALL)
    base = f"/api/v1/projects/{project}"
    async with seed.signed_in(f"viewer-{project.hex[:6]}@example.com") as http:
        for path, body in [
            (f"{base}/tasks/{task}/retry", {}),
            (f"{base}/tasks/{task}/cancel", {"terminate": True}),
            (f"{base}/queues/purge", {"queue": "q", "confirm": "q"}),
            (f"{base}/rate-limits", {"task_name": "a.b", "rate": "1/m"}),
            (f"{base}/workers/pool", {"worker": "w@h", "delta": 1}),
            (f"{base}/workers/restart", {"worker": "w@h"}),
        ]:
            answer = await http.post(path, json=body)
            assert answer.status_code == 403, (path, answer.text)
            assert answer.json()["code"] == "permission.denied"
    assert _rows(seed.admin_url, "SELECT id FROM commands") == []

    async with seed.signed_in(f"operator-{project.hex[:6]}@example.com") as http:
        answer = await http.post(f"{base}/tasks/{task}/cancel", json={"terminate": True})
        assert answer.status_code == 202, answer.text
        command = answer.json()
        assert command["status"] == "queued"
        assert command["action"] == "cancel_task"
        assert command["agent_id"] == str(agent_id)
        assert command["parameters"]["terminate"] is True
        answer = await http.post(f"{base}/workers/pool", json={"worker": "w@h", "delta": -2})
        assert answer.json()["action"] == "pool_shrink"
        assert answer.json()["parameters"] == {"worker_name": "w@h", "delta": 2}
        listed = await http.get(f"{base}/commands", params={"task_id": str(task)})
        assert [c["id"] for c in listed.json()] == [command["id"]]
        one = await http.get(f"{base}/commands/{command['id']}")
        assert one.json()["id"] == command["id"]
        missing = await http.get(f"{base}/commands/{uuid.uuid4()}")
        assert missing.status_code == 404
        assert missing.json()["code"] == "command.not_found"
    audit = _rows(
        seed.admin_url,
        "SELECT action, target_type, target_id, details FROM audit_log "
        "WHERE action LIKE 'task.%%' OR action LIKE 'worker.%%' ORDER BY id",
    )
    assert [a["action"] for a in audit] == ["task.cancel", "worker.pool_shrink"]
    assert audit[0]["target_id"] == task
    assert audit[0]["details"]["command_id"] == command["id"]
    assert audit[0]["details"]["terminate"] is True


async def test_an_action_no_agent_advertised_is_refused(seed: Seed) -> None:
    project, _agent, task = await _project(seed, ["cancel_task"])
    async with seed.signed_in(f"operator-{project.hex[:6]}@example.com") as http:
        answer = await http.post(f"/api/v1/projects/{project}/tasks/{task}/retry")
        assert answer.status_code == 409, answer.text
        assert answer.json()["code"] == "command.not_offered"
        answer = await http.post(
            f"/api/v1/projects/{project}/queues/purge", json={"queue": "q", "confirm": "q"}
        )
        assert answer.json()["code"] == "command.not_offered"
    assert _rows(seed.admin_url, "SELECT id FROM commands") == []


async def test_a_command_nobody_answers_times_out(seed: Seed) -> None:
    project, _agent, task = await _project(seed, ALL)
    async with seed.signed_in(f"operator-{project.hex[:6]}@example.com") as http:
        answer = await http.post(
            f"/api/v1/projects/{project}/tasks/{task}/retry", json={"timeout_seconds": 1}
        )
        command = answer.json()["id"]

        async def timed_out() -> bool:
            got = await http.get(f"/api/v1/projects/{project}/commands/{command}")
            return bool(got.json()["status"] == "timed_out")

        assert await wait_for(timed_out, within=30)
        final = (await http.get(f"/api/v1/projects/{project}/commands/{command}")).json()
        assert final["finished_at"] is not None
        assert "deadline" in final["error"]


DEEP = {"a": 1}
for _ in range(200):
    DEEP = {"a": DEEP}


@pytest.mark.parametrize(
    ("suffix", "body", "code"),
    [
        ("retry", {"override_kwargs": {"note": "a\u0000b"}}, "validation_failed"),
        ("retry", {"override_args": [2**70]}, "validation_failed"),
        ("retry", {"override_kwargs": DEEP}, "validation_failed"),
        ("retry", {"timeout_seconds": 0}, "validation_failed"),
        ("retry", {"timeout_seconds": 2**70}, "validation_failed"),
        ("cancel", {"terminate": "yes please"}, "validation_failed"),
        ("purge", {"queue": "jobs", "confirm": "job"}, "command.confirmation"),
        ("purge", {"queue": "jo\u0000bs", "confirm": "jo\u0000bs"}, "validation_failed"),
        ("purge", {"queue": "jobs", "confirm": "jobs", "expected_depth": 2**70},
         "validation_failed"),
        ("rate", {"task_name": "a.b", "rate": "fast"}, "validation_failed"),
        ("rate", {"task_name": "a\nb", "rate": "1/m"}, "validation_failed"),
        ("pool", {"worker": "w@h", "delta": 0}, "validation_failed"),
        ("pool", {"worker": "w@h", "delta": 2**70}, "validation_failed"),
    ],
)  # fmt: skip
async def test_hostile_input_is_a_4xx_and_stores_nothing(
    seed: Seed, suffix: str, body: dict[str, Any], code: str
) -> None:
    project, _agent, task = await _project(seed, ALL)
    paths = {
        "retry": f"tasks/{task}/retry",
        "cancel": f"tasks/{task}/cancel",
        "purge": "queues/purge",
        "rate": "rate-limits",
        "pool": "workers/pool",
    }
    async with seed.signed_in(f"operator-{project.hex[:6]}@example.com") as http:
        answer = await http.post(f"/api/v1/projects/{project}/{paths[suffix]}", json=body)
        assert 400 <= answer.status_code < 500, answer.text
        assert answer.json()["code"] == code, answer.text
        huge = await http.post(
            f"/api/v1/projects/{project}/{paths[suffix]}",
            content=b'{"override_args": ["' + b"x" * (2 << 20) + b'"]}',
            headers={"content-type": "application/json"},
        )
        assert huge.status_code == 413
    assert _rows(seed.admin_url, "SELECT id FROM commands") == []


async def test_the_long_poll_routes_refuse_hostile_requests(seed: Seed) -> None:
    owner = await seed.user("lp@example.com")
    project = await seed.project(owner)
    created = await seed.agent(owner, project)
    auth = {"authorization": f"Bearer {created.token}"}
    nonce = {"x-z4j-session-nonce": "n" * 22}
    async with seed.signed_in("lp@example.com") as http:
        probe = await http.get("/api/v1/agent/commands?wait=0&max_frames=0", headers=auth | nonce)
        assert probe.status_code == 200
        assert probe.json() == {"frames": []}
        assert probe.headers["x-z4j-agent-id"] == str(created.agent["id"])
        assert probe.headers["x-z4j-project-id"] == str(project)
        for query in ("wait=abc", "wait=99999999999999999999", "max_frames=-1", "wait=%C2%B2"):
            bad = await http.get(f"/api/v1/agent/commands?{query}", headers=auth | nonce)
            assert bad.status_code == 400, (query, bad.text)
        bad = await http.get(
            "/api/v1/agent/commands?wait=0", headers=auth | {"x-z4j-session-nonce": "x y"}
        )
        assert bad.status_code == 400
        anonymous = await http.get("/api/v1/agent/commands?wait=0&max_frames=0", headers=nonce)
        assert anonymous.status_code == 401
        deep = b'{"frames": [' + b"[" * 100 + b"]" * 100 + b"]}"
        for body in (deep, b'{"frames": [1, 2]}', b"\x00", b'{"frames": "x"}'):
            refused = await http.post("/api/v1/agent/events", content=body, headers=auth | nonce)
            assert refused.status_code == 400, (body[:20], refused.text)
        nul = await http.post(
            "/api/v1/agent/events",
            json={"frames": ['{"v": 2, "id": "a\\u0000"}']},
            headers=auth | nonce,
        )
        assert nul.status_code in (200, 400, 403), nul.text
        for session in (b"s" * 65, b"a\x7fb", "é".encode() * 10, b"a\x00b"):
            unknown = await http.get(
                "/api/v1/agent/commands?wait=0", headers=auth | {"x-z4j-session": session}
            )
            assert unknown.status_code == 404, (session, unknown.text)


def _token(html: str) -> str:
    found = re.search(r'name="csrf_token" value="([^"]+)"', html)
    assert found is not None
    return found.group(1)


async def test_dashboard_buttons_and_the_operate_page(seed: Seed) -> None:
    project, _agent, task = await _project(seed, ALL)
    page_path = f"/projects/{project}/tasks/{task}"
    async with seed.signed_in(f"viewer-{project.hex[:6]}@example.com") as http:
        page = await http.get(page_path)
        assert page.status_code == 200
        assert f"{page_path}/retry" not in page.text
        refused = await http.post(f"{page_path}/retry", data={"csrf_token": _token(page.text)})
        assert refused.status_code == 403
        operate = await http.get(f"/projects/{project}/operate")
        assert "/operate/purge" not in operate.text
    async with seed.signed_in(f"operator-{project.hex[:6]}@example.com") as http:
        page = await http.get(page_path)
        assert f'action="{page_path}/retry"' in page.text
        assert f'action="{page_path}/cancel"' in page.text
        done = await http.post(
            f"{page_path}/cancel", data={"csrf_token": _token(page.text), "terminate": "1"}
        )
        assert done.status_code == 303
        page = await http.get(done.headers["location"])
        assert "cancel_task" in page.text  # the task's commands
        operate = await http.get(f"/projects/{project}/operate")
        token = _token(operate.text)
        wrong = await http.post(
            f"/projects/{project}/operate/purge",
            data={"csrf_token": token, "queue": "jobs", "confirm": "jbos"},
        )
        assert wrong.status_code == 422
        assert "Type the queue" in wrong.text
        right = await http.post(
            f"/projects/{project}/operate/purge",
            data={"csrf_token": token, "queue": "jobs", "confirm": "jobs", "expected_depth": "3"},
        )
        assert right.status_code == 200
        assert "purge_queue" in right.text
        for odd in ("+-1", "\u00b2", "1" * 40):
            answer = await http.post(
                f"/projects/{project}/operate/pool",
                data={"csrf_token": token, "worker": "w@h", "delta": odd},
            )
            assert answer.status_code == 422, (odd, answer.text)
        for path, data in [
            ("rate-limit", {"task_name": "a.b", "rate": "5/s"}),
            ("pool", {"worker": "w@h", "delta": "+1"}),
            ("restart", {"worker": "w@h"}),
        ]:
            answer = await http.post(
                f"/projects/{project}/operate/{path}", data={"csrf_token": token, **data}
            )
            assert answer.status_code == 200, (path, answer.text)
    actions = [r["action"] for r in _rows(seed.admin_url, "SELECT action FROM commands")]
    assert sorted(actions) == ["cancel_task", "pool_grow", "purge_queue", "rate_limit",
                               "restart_worker"]  # fmt: skip


async def test_bulk_retry_from_the_filtered_list(seed: Seed) -> None:
    project, agent_id, _task = await _project(seed, ALL)
    seed.tasks(
        project,
        [{"agent_id": agent_id, "state": "failed", "name": "app.charge"} for _ in range(3)]
        + [{"agent_id": agent_id, "state": "succeeded", "name": "app.charge"}],
    )
    async with seed.signed_in(f"operator-{project.hex[:6]}@example.com") as http:
        listing = await http.get(f"/projects/{project}/tasks?state=failed&name=app.charge")
        assert "Retry all matching" in listing.text
        token = _token(listing.text)
        form = {"csrf_token": token, "state": "failed", "name": "app.charge"}
        preview = await http.post(f"/projects/{project}/tasks/bulk-retry", data=form)
        assert preview.status_code == 200
        assert "<b>3</b> tasks match" in preview.text
        assert _rows(seed.admin_url, "SELECT id FROM bulk_retries") == []
        started = await http.post(
            f"/projects/{project}/tasks/bulk-retry", data=form | {"confirmed": "1"}
        )
        assert started.status_code == 303
        page = await http.get(started.headers["location"])
        assert "of 3 handled" in page.text

        async def issued() -> bool:
            got = await http.get(
                started.headers["location"].replace("/projects", "/api/v1/projects")
            )
            return bool(got.json()["processed"] == 3)

        assert await wait_for(issued, within=30)
        bad = await http.post(
            f"/api/v1/projects/{project}/tasks/bulk-retry?state=failed", json={"max": 1001}
        )
        assert bad.status_code == 422
    commands = _rows(seed.admin_url, "SELECT action, bulk_id FROM commands")
    assert len(commands) == 3
    assert {c["action"] for c in commands} == {"retry_task"}
    (audit,) = _rows(
        seed.admin_url, "SELECT details FROM audit_log WHERE action = 'task.bulk_retry'"
    )
    assert audit["details"]["count"] == 3


async def test_queue_reads_within_the_window_share_one_inspect_command(seed: Seed) -> None:
    """Loads arriving together share one read; loads after it, within READ_REUSE_SECONDS,
    reuse its result (API and dashboard alike); past the window a new read is issued."""
    project, _agent, _task = await _project(seed, ["inspect_queues", "inspect_workers"])
    query = "SELECT id FROM commands WHERE action = 'inspect_queues'"
    async with seed.signed_in(f"viewer-{project.hex[:6]}@example.com") as http:
        url = f"/api/v1/projects/{project}/queues"
        loads = [asyncio.create_task(http.get(url)) for _ in range(3)]
        assert await wait_for(lambda: asyncio.to_thread(_rows, seed.admin_url, query), within=60)
        # The agent's answer, as its command_result frame would store it.
        with psycopg.connect(seed.admin_url) as conn:
            conn.execute(
                "UPDATE commands SET status = 'succeeded', finished_at = now(), result = %s "
                "WHERE action = 'inspect_queues'",
                (Jsonb({"queues": [{"queue": "q1", "depth": 4, "consumers": 1}]}),),
            )
        for answer in await asyncio.gather(*loads):
            assert answer.status_code == 200, answer.text
            assert answer.json()["live"] == "succeeded"
            assert answer.json()["items"][0]["depth"] == 4
        page = await http.get(f"/projects/{project}/queues")
        assert re.search(r'<td class="mono">q1</td><td>4</td><td>1</td>', page.text), page.text
        assert (await http.get(url)).json()["live"] == "succeeded"
        assert len(_rows(seed.admin_url, query)) == 1
        with psycopg.connect(seed.admin_url) as conn:
            conn.execute("UPDATE commands SET created_at = created_at - interval '11 seconds'")
        later = asyncio.create_task(http.get(url))
        assert await wait_for(
            lambda: asyncio.to_thread(lambda: len(_rows(seed.admin_url, query)) == 2), within=60
        )
        with psycopg.connect(seed.admin_url) as conn:
            conn.execute(
                "UPDATE commands SET status = 'succeeded', finished_at = now(), result = %s "
                "WHERE action = 'inspect_queues' AND status = 'queued'",
                (Jsonb({"queues": [{"queue": "q1", "depth": 0, "consumers": 1}]}),),
            )
        assert (await later).json()["items"][0]["depth"] == 0
