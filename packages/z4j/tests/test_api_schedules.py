"""Schedules through the REST API: the whole life of one, the roles, the refusals, the audit
rows, and the beat's side (its schedule list with an ETag, and claims only one beat wins)."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import psycopg

from .conftest import BASE_URL, Seed

CRON = {"name": "nightly report", "task": "reports.nightly", "schedule_type": "cron",
        "expression": "30 2 * * *", "timezone": "Europe/Paris", "args": [1],
        "kwargs": {"to": "ops"}, "queue": "reports"}  # fmt: skip


def audit_actions(url: str, project: uuid.UUID) -> list[str]:
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT action FROM audit_log WHERE project_id = %s AND action LIKE 'schedule.%%' "
            "ORDER BY id",
            (project,),
        ).fetchall()
    return [row[0] for row in rows]


async def test_a_schedule_is_created_edited_switched_run_and_deleted(
    seed: Seed, z4j_database: str
) -> None:
    owner = await seed.user("own@example.com")
    project = await seed.project(owner)
    base = f"/api/v1/projects/{project}/schedules"
    async with seed.signed_in("own@example.com") as http:
        created = await http.post(base, json=CRON)
        assert created.status_code == 201, created.text
        body = created.json()
        assert body["kwargs"] == {"to": "ops"}
        assert body["queue"] == "reports"
        assert body["scheduler"] == "z4j"
        assert body["enabled"] is True
        nxt = datetime.fromisoformat(body["next_run_at"])
        # 02:30 on the Paris wall clock, within the next day
        local = nxt.astimezone(__import__("zoneinfo").ZoneInfo("Europe/Paris"))
        assert (local.hour, local.minute) == (2, 30)
        assert timedelta(0) < nxt - datetime.now(UTC) <= timedelta(days=1)
        sid = body["id"]

        listed = (await http.get(base)).json()
        assert [s["name"] for s in listed] == ["nightly report"]

        taken = await http.post(base, json=CRON)
        assert taken.status_code == 409
        assert taken.json()["code"] == "schedule.name_taken"

        edited = await http.patch(
            f"{base}/{sid}", json={"schedule_type": "interval", "expression": "90s"}
        )
        assert edited.status_code == 200, edited.text
        nxt = datetime.fromisoformat(edited.json()["next_run_at"])
        assert timedelta(seconds=80) < nxt - datetime.now(UTC) <= timedelta(seconds=90)
        assert edited.json()["args"] == [1]  # fields not given stay

        off = (await http.post(f"{base}/{sid}/disable")).json()
        assert off["enabled"] is False
        assert off["next_run_at"] is None
        refused = await http.post(f"{base}/{sid}/run")
        assert refused.status_code == 409
        assert refused.json()["code"] == "schedule.disabled"
        on = (await http.post(f"{base}/{sid}/enable")).json()
        assert on["enabled"] is True
        assert on["next_run_at"] is not None

        ran = await http.post(f"{base}/{sid}/run")
        assert ran.status_code == 202
        assert datetime.fromisoformat(ran.json()["next_run_at"]) <= datetime.now(UTC)

        assert (await http.delete(f"{base}/{sid}")).status_code == 204
        gone = await http.get(f"{base}/{sid}")
        assert gone.status_code == 404
        assert gone.json()["code"] == "schedule.not_found"
    assert audit_actions(z4j_database, project) == [
        "schedule.create", "schedule.update", "schedule.disable", "schedule.enable",
        "schedule.run", "schedule.delete",
    ]  # fmt: skip


async def test_bad_definitions_are_refused_naming_the_field(seed: Seed) -> None:
    owner = await seed.user("own@example.com")
    project = await seed.project(owner)
    base = f"/api/v1/projects/{project}/schedules"
    cases: list[tuple[dict[str, Any], str]] = [
        ({"expression": "61 * * * *"}, "expression"),
        ({"expression": "* * *"}, "expression"),
        ({"expression": "0 0 30 2 *"}, "expression"),
        ({"schedule_type": "interval", "expression": "0s"}, "expression"),
        ({"schedule_type": "interval", "expression": "every now and then"}, "expression"),
        ({"schedule_type": "date", "expression": "2001-01-01T00:00"}, "expression"),
        ({"timezone": "Mars/Olympus"}, "timezone"),
        ({"task": "not a task name"}, "task"),
        ({"agent_id": str(uuid.uuid4())}, "agent_id"),
        ({"kwargs": {"note": "a\u0000b"}}, "args"),
        ({"queue": "no spaces please"}, "queue"),
    ]
    async with seed.signed_in("own@example.com") as http:
        for change, field in cases:
            answer = await http.post(base, json=CRON | change)
            assert answer.status_code == 422, (change, answer.text)
            assert field in answer.text, (change, answer.text)
        assert (await http.get(base)).json() == []


async def test_a_viewer_reads_and_an_operator_writes(seed: Seed) -> None:
    owner = await seed.user("own@example.com")
    project = await seed.project(owner)
    for email, role in (("view@example.com", "viewer"), ("op@example.com", "operator")):
        await seed.member(project, await seed.user(email), role)
    base = f"/api/v1/projects/{project}/schedules"
    async with seed.signed_in("view@example.com") as http:
        denied = await http.post(base, json=CRON)
        assert denied.status_code == 403
        assert denied.json()["code"] == "permission.denied"
    async with seed.signed_in("op@example.com") as http:
        sid = (await http.post(base, json=CRON)).json()["id"]
        assert (await http.post(f"{base}/{sid}/run")).status_code == 202
    async with seed.signed_in("view@example.com") as http:
        assert [s["id"] for s in (await http.get(base)).json()] == [sid]
        for verb in ("enable", "disable", "run"):
            assert (await http.post(f"{base}/{sid}/{verb}")).status_code == 403
        assert (await http.patch(f"{base}/{sid}", json={"enabled": False})).status_code == 403
        assert (await http.delete(f"{base}/{sid}")).status_code == 403


async def test_the_beat_reads_its_schedules_and_one_claim_wins_each_slot(seed: Seed) -> None:
    owner = await seed.user("own@example.com")
    project = await seed.project(owner)
    agent = await seed.agent(owner, project)
    other = await seed.agent(owner, await seed.project(owner, "elsewhere"))
    base = f"/api/v1/projects/{project}/schedules"
    async with seed.signed_in("own@example.com") as http:
        sid = (await http.post(base, json=CRON)).json()["id"]
        await http.post(base, json=CRON | {"name": "off", "enabled": False})
        await http.post(f"{base}/{sid}/run")
    transport = httpx.ASGITransport(app=seed.app)
    async with httpx.AsyncClient(transport=transport, base_url=BASE_URL) as beat:
        beat.headers["Authorization"] = f"Bearer {agent.token}"
        first = await beat.get("/api/v1/agent/schedules")
        assert first.status_code == 200, first.text
        [entry] = first.json()["schedules"]  # the disabled one is not sent
        assert entry["id"] == sid
        assert entry["options"] == {"queue": "reports"}
        assert entry["kwargs"] == {"to": "ops"}
        etag = first.headers["etag"]
        again = await beat.get("/api/v1/agent/schedules", headers={"If-None-Match": etag})
        assert again.status_code == 304

        # Two beats claim the same slot at once: exactly one may send the run.
        claims = await asyncio.gather(
            *(
                beat.post(
                    f"/api/v1/agent/schedules/{sid}/claim",
                    json={"slot": entry["next_run_at"], "task_id": f"run-{n}"},
                )
                for n in range(4)
            )
        )
        assert [c.status_code for c in claims] == [200] * 4
        assert sorted(c.json()["claimed"] for c in claims) == [False, False, False, True]
        moved = await beat.get("/api/v1/agent/schedules", headers={"If-None-Match": etag})
        assert moved.status_code == 200  # the next run moved on: a new version
        [entry] = moved.json()["schedules"]
        assert datetime.fromisoformat(entry["next_run_at"]) > datetime.now(UTC)
        # A slot not yet come is not claimed.
        early = await beat.post(
            f"/api/v1/agent/schedules/{sid}/claim",
            json={"slot": entry["next_run_at"], "task_id": "early"},
        )
        assert early.json()["claimed"] is False

        # Another project's agent does not see it, nor claim it; a bad token is refused.
        beat.headers["Authorization"] = f"Bearer {other.token}"
        assert (await beat.get("/api/v1/agent/schedules")).json()["schedules"] == []
        foreign = await beat.post(
            f"/api/v1/agent/schedules/{sid}/claim",
            json={"slot": entry["next_run_at"], "task_id": "x"},
        )
        assert foreign.status_code == 404
        beat.headers["Authorization"] = "Bearer z4ja_nope"
        assert (await beat.get("/api/v1/agent/schedules")).status_code == 401

    async with seed.signed_in("own@example.com") as http:
        got = (await http.get(f"{base}/{sid}")).json()
    assert got["total_run_count"] == 1
    assert got["last_run_at"] is not None
    assert got["last_task_id"] in {f"run-{n}" for n in range(4)}


async def test_a_beat_reports_its_apps_beat_schedule_and_the_brain_keeps_new_names(
    seed: Seed, z4j_database: str
) -> None:
    owner = await seed.user("own@example.com")
    project = await seed.project(owner)
    agent = await seed.agent(owner, project)
    async with seed.signed_in("own@example.com") as http:
        await http.post(f"/api/v1/projects/{project}/schedules", json=CRON)
    entries = [
        {"name": "nightly report", "task": "other.task", "schedule_type": "interval",
         "expression": "5"},
        {"name": "poll", "task": "app.poll", "schedule_type": "interval", "expression": "30",
         "timezone": "UTC", "args": [1], "kwargs": {"a": 1}, "queue": "polling"},
        {"name": "broken", "task": "app.x", "schedule_type": "cron", "expression": "99 * * * *"},
    ]  # fmt: skip
    transport = httpx.ASGITransport(app=seed.app)
    async with httpx.AsyncClient(transport=transport, base_url=BASE_URL) as beat:
        beat.headers["Authorization"] = f"Bearer {agent.token}"
        answer = await beat.post("/api/v1/agent/schedules/report", json={"schedules": entries})
        assert answer.status_code == 200, answer.text
        assert answer.json()["created"] == ["poll"]
        assert answer.json()["existing"] == ["nightly report"]
        assert [r["field"] for r in answer.json()["rejected"]] == ["expression"]
        again = await beat.post("/api/v1/agent/schedules/report", json={"schedules": entries})
        assert again.json()["created"] == []
    async with seed.signed_in("own@example.com") as http:
        kept = {
            s["name"]: s for s in (await http.get(f"/api/v1/projects/{project}/schedules")).json()
        }
    assert kept["nightly report"]["task"] == "reports.nightly"  # the brain's own stays
    assert kept["poll"]["kwargs"] == {"a": 1}
    assert kept["poll"]["queue"] == "polling"
    assert kept["poll"]["next_run_at"] is not None
    assert kept["poll"]["source"] == "beat_schedule"
    with psycopg.connect(z4j_database) as conn:
        rows = conn.execute(
            "SELECT actor_user_id, details FROM audit_log WHERE action = 'schedule.create' "
            "AND details ->> 'source' = 'beat_schedule'"
        ).fetchall()
    assert [(r[0], r[1]["name"]) for r in rows] == [(None, "poll")]
