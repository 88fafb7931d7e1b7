"""Long-poll sessions across two brain processes on one database, at the protocol level.

Each request of one session goes to whichever brain the test picks, as a load balancer without
sticky routing would send it: the session opened on one brain is known to the other, a frame
taken by one is a replay at the other, the frames both brains sign form one strictly increasing
sequence (checked by one verifier, as the agents check it), and a command issued through one
brain's API is delivered by a poll on the other. Both dialects: our agent's (hello and
``X-Z4J-Session``) and the z4j-celery agent's (``X-Z4J-Session-Nonce``).
"""

from __future__ import annotations

import asyncio
import json
import secrets
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from platformkit.testing.databases import DatabaseFactory
from platformkit.testing.services import free_port
from z4j.actions import users
from z4j.controllers.commands import purge_http_sessions
from z4j.secrets_file import load_or_create
from z4j.settings import Settings
from z4j.startup import Prepared, open_brain
from z4j.store import http_sessions as session_store
from z4j.testing import BrainProcess, wait_for, z4j_template
from z4j_agent.protocol import FrameSigner, FrameVerifier, Session, format_ts, unsigned_frame

from .conftest import Seed

ADMIN_EMAIL, ADMIN_PASSWORD = "replica-admin@example.com", "a long replica admin password"
HELLO = {
    "protocol_version": "2",
    "agent_version": "test",
    "framework": "celery",
    "engines": ["celery"],
    "capabilities": {"celery": ["retry_task", "cancel_task"]},
    "worker_id": "replica-1",
}


@pytest.fixture(scope="module")
async def brains(
    database_factory: DatabaseFactory,
    brain_config_dir: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> AsyncIterator[tuple[BrainProcess, BrainProcess]]:
    """Two brains on one database with one administrator, for the module: each test has an
    agent and a project of its own."""
    url = database_factory.create(await z4j_template(database_factory, brain_config_dir), "z4j")
    logs = tmp_path_factory.mktemp("replicas")
    pair = tuple(BrainProcess(url, brain_config_dir, free_port(), logs / f"brain{i}.log")
                 for i in (1, 2))  # fmt: skip
    try:
        await asyncio.gather(*(asyncio.to_thread(brain.start) for brain in pair))
        settings = Settings(
            database_url=url,  # type: ignore[arg-type]
            config_dir=brain_config_dir,
            public_url=pair[0].url,
        )
        brain_secrets, _ = load_or_create(brain_config_dir)
        opened = await open_brain(Prepared(settings, brain_secrets, url, False), max_size=2)
        try:
            await users.create_first_admin(opened, ADMIN_EMAIL, ADMIN_PASSWORD)
        finally:
            await opened.pool.close()
        yield pair[0], pair[1]
    finally:
        for brain in pair:
            brain.stop()
        database_factory.drop(url)


@asynccontextmanager
async def operator(brain: BrainProcess) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=f"{brain.url}/api/v1", timeout=30) as client:
        answer = await client.post(
            "/auth/login", json={"email": ADMIN_EMAIL, "password": ADMIN_PASSWORD}
        )
        assert answer.status_code == 200, answer.text
        yield client


def failed_event(engine_id: str) -> dict[str, Any]:
    return {
        "id": str(uuid.uuid4()),
        "engine": "celery",
        "kind": "task.failed",
        "task_id": engine_id,
        "occurred_at": format_ts(datetime.now(UTC)),
        "data": {"task_name": "app.add", "exception": "ValueError('x')"},
    }


async def task_id(brain: BrainProcess, engine_id: str) -> uuid.UUID:
    async def found() -> uuid.UUID | None:
        async with await psycopg.AsyncConnection.connect(brain.admin_url) as conn:
            cur = await conn.execute("SELECT id FROM tasks WHERE engine_task_id = %s", (engine_id,))
            row = await cur.fetchone()
        return row[0] if row else None

    got = await wait_for(found, within=60)
    assert got is not None
    return uuid.UUID(str(got))


async def command_status(api: httpx.AsyncClient, project: uuid.UUID, command: str) -> str:
    return str((await api.get(f"/projects/{project}/commands/{command}")).json()["status"])


async def test_our_dialect_one_session_on_two_brains(
    brains: tuple[BrainProcess, BrainProcess],
) -> None:
    brain_server = brains[0]
    a, b = brains[0].url, brains[1].url
    creds = await brain_server.new_agent()
    project = creds["project_id"]
    auth = {"Authorization": f"Bearer {creds['token']}"}
    async with httpx.AsyncClient(timeout=90) as http, operator(brain_server) as api:
        hello = await http.post(f"{a}/api/v1/agent/hello", json=unsigned_frame("hello", HELLO),
                                headers=auth)  # fmt: skip
        assert hello.status_code == 200, hello.text
        ack = hello.json()["payload"]
        session = Session(creds["secret"], ack["agent_id"], ack["project_id"], ack["session_id"])
        signer, verifier = FrameSigner(session), FrameVerifier(session)
        headers = auth | {"X-Z4J-Session": ack["session_id"]}

        # The session opened on A takes a frame on B; the same frame is a replay on either.
        batch = signer.sign("event_batch", {"events": [failed_event("rep-1")]})
        taken = await http.post(f"{b}/api/v1/agent/events", json=batch, headers=headers)
        assert taken.status_code == 200, taken.text
        first_ack = verifier.verify(taken.json())
        assert first_ack["payload"]["accepted"] == 1
        for brain in (a, b):
            replay = await http.post(f"{brain}/api/v1/agent/events", json=batch, headers=headers)
            assert replay.status_code == 403, replay.text
        # A frame signed earlier than one taken arrives late on the other brain: refused.
        early, late = signer.sign("heartbeat", {}), signer.sign("heartbeat", {})
        assert (await http.post(f"{a}/api/v1/agent/events", json=late,
                                headers=headers)).status_code == 204  # fmt: skip
        assert (await http.post(f"{b}/api/v1/agent/events", json=early,
                                headers=headers)).status_code == 403  # fmt: skip

        # A command issued through A's API reaches the agent through a poll on B, with a
        # sequence number above every frame either brain signed before.
        task = await task_id(brain_server, "rep-1")
        poll = asyncio.create_task(http.get(f"{b}/api/v1/agent/commands?wait=60", headers=headers))
        issued = await api.post(f"/projects/{project}/tasks/{task}/retry", json={})
        assert issued.status_code == 202, issued.text
        polled = await poll
        assert polled.status_code == 200, polled.text
        (command,) = polled.json()["frames"]
        command = verifier.verify(command)
        assert command["id"] == issued.json()["id"]
        assert command["seq"] > first_ack["seq"]
        for brain, kind, payload in (
            (a, "command_ack", {"command_id": command["id"]}),
            (b, "command_result", {"command_id": command["id"], "status": "success",
                                   "result": {"new_task_id": "rep-1-again"}}),
        ):  # fmt: skip
            frame = signer.sign(kind, payload, frame_id=command["id"])
            sent = await http.post(f"{brain}/api/v1/agent/events", json=frame, headers=headers)
            assert sent.status_code == 204, sent.text
        assert await command_status(api, project, command["id"]) == "succeeded"
        # The next reply from A continues the sequence B's command frame took.
        batch = signer.sign("event_batch", {"events": [failed_event("rep-2")]})
        taken = await http.post(f"{a}/api/v1/agent/events", json=batch, headers=headers)
        assert verifier.verify(taken.json())["seq"] > command["seq"]

        # A newer hello of the same worker on B replaces the session on both brains.
        again = await http.post(f"{b}/api/v1/agent/hello", json=unsigned_frame("hello", HELLO),
                                headers=auth)  # fmt: skip
        assert again.status_code == 200
        for brain in (a, b):
            stale = await http.post(f"{brain}/api/v1/agent/events",
                                    json=signer.sign("heartbeat", {}), headers=headers)  # fmt: skip
            assert stale.status_code == 409, stale.text


async def test_z4j_celery_dialect_one_session_on_two_brains(
    brains: tuple[BrainProcess, BrainProcess],
) -> None:
    brain_server = brains[0]
    a, b = brains[0].url, brains[1].url
    creds = await brain_server.new_agent()
    project = creds["project_id"]
    nonce = secrets.token_urlsafe(16)
    headers = {
        "Authorization": f"Bearer {creds['token']}",
        "X-Z4J-Session-Nonce": nonce,
        "X-Z4J-Retry-Contracts": "celery=1",
    }
    session = Session(creds["secret"], str(creds["agent_id"]), str(project), nonce)
    signer, verifier = FrameSigner(session), FrameVerifier(session)
    async with httpx.AsyncClient(timeout=90) as http, operator(brain_server) as api:
        probe = await http.get(f"{a}/api/v1/agent/commands?wait=0&max_frames=0", headers=headers)
        assert probe.status_code == 200, probe.text
        assert probe.headers["x-z4j-agent-id"] == str(creds["agent_id"])

        def post(frames: list[dict[str, Any]]) -> dict[str, Any]:
            return {"frames": [json.dumps(f) for f in frames]}

        batch = signer.sign("event_batch", {"events": [failed_event("nonce-1")]})
        heartbeat = signer.sign("heartbeat", {})
        taken = await http.post(f"{b}/api/v1/agent/events", json=post([batch, heartbeat]),
                                headers=headers)  # fmt: skip
        assert taken.json() == {"accepted": 2}
        replay = await http.post(f"{a}/api/v1/agent/events", json=post([heartbeat]),
                                 headers=headers)  # fmt: skip
        assert replay.status_code == 403, replay.text

        last_seq = 0
        for engine_id, issue_on, poll_on in (("nonce-1", a, b), ("nonce-2", b, a)):
            if engine_id == "nonce-2":
                frame = signer.sign("event_batch", {"events": [failed_event(engine_id)]})
                sent = await http.post(f"{a}/api/v1/agent/events", json=post([frame]),
                                       headers=headers)  # fmt: skip
                assert sent.json() == {"accepted": 1}
            task = await task_id(brain_server, engine_id)
            poll = asyncio.create_task(
                http.get(f"{poll_on}/api/v1/agent/commands?wait=60", headers=headers)
            )
            # The operator's session is in the database too: either brain takes it.
            path = f"{issue_on}/api/v1/projects/{project}/tasks/{task}/retry"
            issued = await api.post(path, json={})
            assert issued.status_code == 202, issued.text
            polled = await poll
            (raw,) = polled.json()["frames"]
            command = verifier.verify(json.loads(raw))
            assert command["id"] == issued.json()["id"]
            assert command["seq"] > last_seq
            last_seq = command["seq"]


async def test_idle_sessions_and_old_nonces_are_purged(seed: Seed) -> None:
    """A session idle past IDLE_SECONDS is gone for every replica (404) and the sweeper deletes
    it; a nonce past the nonce memory is deleted and may be used again."""
    owner = await seed.user("purge-owner@example.com", is_admin=True)
    project = await seed.project(owner)
    agent = (await seed.agent(owner, project)).agent["id"]
    brain, now, take = seed.brain, datetime.now(UTC), session_store.take_inbound
    async with brain.project_tx(project) as conn:
        for name in ("idle", "busy"):
            await session_store.open_hello(conn, agent_id=agent, project_id=project,
                                           session_id=name, token_hash="h", worker_id=name,
                                           now=now, replaced_code=4002)  # fmt: skip
            assert await take(conn, agent, project, name, 1, "n1", now) is None
        assert await take(conn, agent, project, "busy", 2, "n1", now) == ("nonce reused")
    with psycopg.connect(seed.admin_url) as conn:
        conn.execute("UPDATE agent_http_sessions SET used_at = now() - interval '11 minutes' "
                     "WHERE session_id = 'idle'")  # fmt: skip
        conn.execute("UPDATE agent_http_nonces SET seen_at = now() - interval '4 minutes' "
                     "WHERE session_id = 'busy'")  # fmt: skip
    async with brain.platform_tx() as conn:
        assert await session_store.find_hello(conn, "idle", datetime.now(UTC)) is None
    await purge_http_sessions(brain)
    with psycopg.connect(seed.admin_url) as conn:
        left = conn.execute("SELECT session_id FROM agent_http_sessions").fetchall()
        nonces = conn.execute("SELECT count(*) FROM agent_http_nonces").fetchone()
    assert left == [("busy",)]
    assert nonces == (0,)
    async with brain.project_tx(project) as conn:
        assert await take(conn, agent, project, "busy", 3, "n1", now) is None
