"""The HTTP fallback of the agent channel against a real brain."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

import httpx
import psycopg
from z4j.testing import BrainProcess
from z4j_agent.protocol import FrameSigner, FrameVerifier, Session, format_ts, unsigned_frame

HELLO = {
    "protocol_version": "2",
    "agent_version": "test",
    "framework": "celery",
    "engines": ["celery"],
    "worker_id": "http-1",
}


def _auth(creds: dict[str, Any], session_id: str | None = None) -> dict[str, str]:
    headers = {"Authorization": f"Bearer {creds['token']}"}
    if session_id:
        headers["X-Z4J-Session"] = session_id
    return headers


async def test_hello_events_ack_and_errors(brain_server: BrainProcess) -> None:
    creds = await brain_server.new_agent()
    async with httpx.AsyncClient(base_url=brain_server.url, timeout=10) as client:
        bad = await client.post(
            "/api/v1/agent/hello",
            json=unsigned_frame("hello", HELLO),
            headers={"Authorization": "Bearer z4ja_" + "B" * 43},
        )
        assert bad.status_code == 401
        r = await client.post(
            "/api/v1/agent/hello", json=unsigned_frame("hello", HELLO), headers=_auth(creds)
        )
        assert r.status_code == 200
        ack = r.json()["payload"]
        session = Session(creds["secret"], ack["agent_id"], ack["project_id"], ack["session_id"])
        signer, verifier = FrameSigner(session), FrameVerifier(session)
        event = {
            "id": str(uuid.uuid4()),
            "engine": "celery",
            "kind": "task.sent",
            "task_id": "http-task",
            "occurred_at": format_ts(datetime.now(UTC)),
            "data": {"task_name": "app.add"},
        }
        frame = signer.sign("event_batch", {"events": [event]})
        r = await client.post(
            "/api/v1/agent/events", json=frame, headers=_auth(creds, ack["session_id"])
        )
        assert r.status_code == 200
        assert verifier.verify(r.json())["payload"]["accepted"] == 1
        replay = await client.post(
            "/api/v1/agent/events", json=frame, headers=_auth(creds, ack["session_id"])
        )
        assert replay.status_code == 403
        hb = await client.post(
            "/api/v1/agent/events",
            json=signer.sign("heartbeat", {}),
            headers=_auth(creds, ack["session_id"]),
        )
        assert hb.status_code == 204
        gone = await client.post(
            "/api/v1/agent/events",
            json=signer.sign("heartbeat", {}),
            headers=_auth(creds, str(uuid.uuid4())),
        )
        assert gone.status_code == 404
        polled = await client.get(
            "/api/v1/agent/commands?wait=0", headers=_auth(creds, ack["session_id"])
        )
        assert polled.status_code == 200
        assert polled.json() == {"frames": []}
    with psycopg.connect(brain_server.admin_url) as conn:
        row = conn.execute("SELECT state FROM tasks WHERE engine_task_id = 'http-task'").fetchone()
    assert row == ("pending",)
