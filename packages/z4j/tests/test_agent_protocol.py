"""The agent channel over a real WebSocket to a real brain: handshake, signed frames, checks."""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
import websockets
from websockets.asyncio.client import ClientConnection
from wirekit import canonical_json
from z4j.testing import BrainProcess
from z4j_agent.protocol import (
    CLOSE_BAD_SIGNATURE,
    CLOSE_BAD_TOKEN,
    CLOSE_UNSUPPORTED_PROTOCOL,
    FrameSigner,
    FrameVerifier,
    Session,
    format_ts,
    unsigned_frame,
)

HELLO = {
    "protocol_version": "2",
    "agent_version": "test",
    "framework": "celery",
    "engines": ["celery"],
    "schedulers": [],
    "capabilities": {"celery": ["retry"]},
    "host": {"hostname": "h1"},
    "worker_id": "w-1",
    "worker_role": "task",
    "worker_pid": 1,
}


async def connect(server: BrainProcess, token: str) -> ClientConnection:
    return await websockets.connect(
        f"ws://127.0.0.1:{server.port}/ws/agent",
        additional_headers={"Authorization": f"Bearer {token}"},
    )


async def handshake(
    server: BrainProcess, creds: dict[str, Any]
) -> tuple[ClientConnection, FrameSigner, FrameVerifier]:
    ws = await connect(server, creds["token"])
    await ws.send(json.dumps(unsigned_frame("hello", HELLO)))
    ack = json.loads(await ws.recv())
    assert ack["type"] == "hello_ack"
    p = ack["payload"]
    assert p["agent_id"] == str(creds["agent_id"])
    assert p["project_id"] == str(creds["project_id"])
    session = Session(creds["secret"], p["agent_id"], p["project_id"], p["session_id"])
    return ws, FrameSigner(session), FrameVerifier(session)


def event(kind: str, task: str, at: datetime, **data: Any) -> dict[str, Any]:
    return {
        "id": str(uuid.uuid4()),
        "engine": "celery",
        "kind": kind,
        "task_id": task,
        "occurred_at": format_ts(at),
        "data": {"task_name": "app.add", **data},
    }


async def closed_with(ws: ClientConnection) -> int | None:
    async def drain() -> None:
        while True:
            await ws.recv()

    with pytest.raises(websockets.ConnectionClosed):
        await asyncio.wait_for(drain(), timeout=10)
    return ws.close_code


async def test_hello_batch_ack_and_rows(brain_server: BrainProcess) -> None:
    creds = await brain_server.new_agent()
    ws, signer, verifier = await handshake(brain_server, creds)
    now = datetime.now(UTC)
    batch = [
        event("task.sent", "t1", now, queue="q", kwargs={"password": "hunter2", "n": 1}),
        event("task.started", "t1", now + timedelta(seconds=1)),
        event("task.succeeded", "t1", now + timedelta(seconds=2), runtime_ms=12.5),
    ]
    frame = signer.sign("event_batch", {"events": batch})
    await ws.send(json.dumps(frame))
    ack = verifier.verify(json.loads(await ws.recv()))
    assert ack["type"] == "event_batch_ack"
    assert ack["payload"] == {"acked_id": frame["id"], "received": 3, "accepted": 3, "rejected": 0}
    await ws.close()
    with psycopg.connect(brain_server.admin_url) as conn:
        row = conn.execute(
            "SELECT state, queue, kwargs_redacted, runtime_ms, agent_id FROM tasks"
            " WHERE engine_task_id = 't1'"
        ).fetchone()
        agent = conn.execute(
            "SELECT state, framework_adapter, engine_adapters FROM agents WHERE id = %s",
            (creds["agent_id"],),
        ).fetchone()
        events = conn.execute("SELECT event_type FROM events ORDER BY ts").fetchall()
    assert row is not None
    assert row[0] == "succeeded"
    assert row[1] == "q"
    assert row[3] == 12.5
    assert row[2]["password"] != "hunter2"
    assert row[2]["n"] == 1
    assert agent is not None
    assert agent[1] == "celery"
    assert agent[2] == ["celery"]
    assert [e[0] for e in events] == ["task_sent", "started", "succeeded"]


async def test_resent_and_reordered_batches_change_nothing(brain_server: BrainProcess) -> None:
    creds = await brain_server.new_agent()
    ws, signer, verifier = await handshake(brain_server, creds)
    now = datetime.now(UTC)
    batch = [
        event("task.sent", "t1", now, args=["see https://u:pw@db/x"], kwargs={"n": 1}),
        event("task.started", "t1", now + timedelta(seconds=1), worker="w@h"),
        event("task.succeeded", "t1", now + timedelta(seconds=2), runtime_ms=3.0),
        event("task.sent", "t2", now + timedelta(seconds=2)),
    ]
    # The later half first, then everything, then everything again in reverse (a lost ack).
    for events in (batch[2:], batch, batch[::-1]):
        wire = signer.sign_encoded("event_batch", canonical_json({"events": events}))
        await ws.send(wire.decode())
        ack = verifier.verify(json.loads(await ws.recv()))
        assert ack["payload"]["accepted"] == len(events)
    await ws.close()
    with psycopg.connect(brain_server.admin_url) as conn:
        tasks = conn.execute(
            "SELECT engine_task_id, state::text, worker, runtime_ms, args_redacted FROM tasks"
            " ORDER BY engine_task_id"
        ).fetchall()
        (count,) = conn.execute("SELECT count(*) FROM events").fetchone() or (0,)
    assert count == 4
    assert [t[:4] for t in tasks] == [
        ("t1", "succeeded", "w@h", 3.0),
        ("t2", "pending", None, None),
    ]
    assert tasks[0][4] == ["see https://u:[redacted]@db/x"]


async def test_bad_token_closes_4401(brain_server: BrainProcess) -> None:
    await brain_server.new_agent()
    ws = await connect(brain_server, "z4ja_" + "A" * 43)
    # The brain may close as soon as it has looked the token up, before the hello arrives.
    with contextlib.suppress(websockets.ConnectionClosed):
        await ws.send(json.dumps(unsigned_frame("hello", HELLO)))
    assert await closed_with(ws) == CLOSE_BAD_TOKEN


async def test_unsupported_protocol_closes_4426(brain_server: BrainProcess) -> None:
    creds = await brain_server.new_agent()
    ws = await connect(brain_server, creds["token"])
    await ws.send(json.dumps({**unsigned_frame("hello", HELLO), "v": 1}))
    assert await closed_with(ws) == CLOSE_UNSUPPORTED_PROTOCOL


@pytest.mark.parametrize("tamper", ["signature", "replay", "skew", "other_session", "seq"])
async def test_signed_frame_checks_close_4403(brain_server: BrainProcess, tamper: str) -> None:
    creds = await brain_server.new_agent()
    ws, signer, _verifier = await handshake(brain_server, creds)
    good = signer.sign("heartbeat", {"buffer_size": 0})
    if tamper == "signature":
        bad = {**good, "payload": {"buffer_size": 1}}
    elif tamper == "replay":
        await ws.send(json.dumps(good))
        bad = good
    elif tamper == "skew":
        stale = unsigned_frame("heartbeat", {})
        stale.update(
            ts=format_ts(datetime.now(UTC) - timedelta(seconds=120)), nonce="n" * 22, seq=99
        )
        stale["hmac"] = signer.session.mac(stale)
        bad = stale
    elif tamper == "other_session":
        other = Session(
            creds["secret"], str(creds["agent_id"]), str(creds["project_id"]), str(uuid.uuid4())
        )
        bad = FrameSigner(other).sign("heartbeat", {})
    else:
        await ws.send(json.dumps(signer.sign("heartbeat", {})))
        bad = FrameSigner(signer.session, first_seq=1).sign("heartbeat", {})
    await ws.send(json.dumps(bad))
    assert await closed_with(ws) == CLOSE_BAD_SIGNATURE


async def test_reconnect_replaces_and_offline_on_close(brain_server: BrainProcess) -> None:
    creds = await brain_server.new_agent()
    first, _, _ = await handshake(brain_server, creds)
    second, _, _ = await handshake(brain_server, creds)
    assert await closed_with(first) == 4002
    await second.close()
    with psycopg.connect(brain_server.admin_url) as conn:
        for _ in range(50):
            state = conn.execute(
                "SELECT state FROM agents WHERE id = %s", (creds["agent_id"],)
            ).fetchone()
            if state == ("offline",):
                break
            conn.execute("SELECT pg_sleep(0.1)")
    assert state == ("offline",)
