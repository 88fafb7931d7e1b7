"""Hostile frames through the agent channel's HTTP fallback, behind the request guard: NUL,
lone surrogates, numbers past their columns, JSON nested 100,000 deep, oversize and broken
frames. As over the WebSocket, each is answered so the agent moves on (a signed ack naming the
batch, or an error frame), the bad event alone is refused or repaired, the session carries on;
a body past twice the frame size is a 413 before the brain keeps it."""

from __future__ import annotations

import asyncio
import json
import uuid
from datetime import UTC, datetime
from typing import Any

import httpx
import psycopg
from platformkit.testing.oversize import send_body
from z4j.testing import BrainProcess
from z4j_agent.protocol import MAX_FRAME_BYTES, FrameSigner, FrameVerifier, Session, unsigned_frame

from .test_agent_http import HELLO, _auth
from .test_agent_protocol import event
from .test_ingest_hostile import raw_frame, surrogate_safe_sign


async def test_hostile_frames_over_http_are_answered_and_the_session_goes_on(
    brain_server: BrainProcess,
) -> None:
    creds = await brain_server.new_agent()
    now = datetime.now(UTC)
    async with httpx.AsyncClient(base_url=brain_server.url, timeout=60) as client:
        deep_hello = (
            '{"v":2,"type":"hello","id":"h","payload":' + "[" * 100_000 + "]" * 100_000 + "}"
        )
        refused = await client.post(
            "/api/v1/agent/hello",
            content=deep_hello,
            headers={**_auth(creds), "Content-Type": "application/json"},
        )
        assert refused.status_code == 400
        assert refused.headers["content-type"] == "application/problem+json"
        assert "nested deeper than" in refused.json()["detail"]

        hello = await client.post(
            "/api/v1/agent/hello", json=unsigned_frame("hello", HELLO), headers=_auth(creds)
        )
        assert hello.status_code == 200
        ack = hello.json()["payload"]
        session = Session(creds["secret"], ack["agent_id"], ack["project_id"], ack["session_id"])
        signer, verifier = FrameSigner(session), FrameVerifier(session)
        headers = {**_auth(creds, ack["session_id"]), "Content-Type": "application/json"}

        async def post(body: str | bytes) -> dict[str, Any]:
            answer = await client.post("/api/v1/agent/events", content=body, headers=headers)
            assert answer.status_code == 200, answer.text
            reply: dict[str, Any] = verifier.verify(answer.json())
            return reply

        batch = [
            event("task.succeeded", "h-good-1", now),
            event("task.sent", "h-nul-1", now, args=["a\x00b"], queue="q\x00"),
            event("task.sent", "h-lone-1", now, args=["x\ud800y"]),
            event("task.succeeded", "h-big-1", now, retry_count=2**70),
            event("task.succeeded", "h-good-2", now),
        ]
        reply = (await post(surrogate_safe_sign(signer, {"events": batch})))["payload"]
        assert (reply["received"], reply["accepted"], reply["rejected"]) == (5, 4, 1)
        assert reply["repaired"] == 2
        assert [(r["index"], r["reason"]) for r in reply["refused"]] == [
            (3, "data.retry_count: integer out of range")
        ]

        deep_id, big_id = uuid.uuid4().hex, uuid.uuid4().hex
        deep = '[{"kind":"task.sent","data":{"args":' + "[" * 100_000 + "]" * 100_000 + "}}]"
        reply = await post(raw_frame(deep_id, deep))
        assert reply["payload"]["acked_id"] == deep_id
        assert "nested deeper than" in reply["payload"]["refused_frame"]
        padding = json.dumps([{"kind": "task.sent", "data": {"args": ["x" * MAX_FRAME_BYTES]}}])
        reply = await post(raw_frame(big_id, padding))
        assert reply["payload"]["acked_id"] == big_id
        assert "larger than" in reply["payload"]["refused_frame"]
        reply = await post('{"id":"h-broken-1","type":"heartbeat", nope}')
        assert reply["type"] == "error"
        assert reply["payload"]["frame_id"] == "h-broken-1"

        # the 413 comes before the body is read, so the client may still be sending: raw socket
        total = 3 * MAX_FRAME_BYTES
        head = (
            "POST /api/v1/agent/events HTTP/1.1\r\nHost: z4j\r\n"
            f"Authorization: {headers['Authorization']}\r\n"
            f"X-Z4J-Session: {ack['session_id']}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {total}\r\n\r\n"
        )
        chunks = [b" " * MAX_FRAME_BYTES] * 3
        huge = await asyncio.to_thread(send_body, "127.0.0.1", brain_server.port, head, chunks)
        assert huge.status == 413
        assert b'"code":"content_too_large"' in huge.head

        later = signer.sign("event_batch", {"events": [event("task.succeeded", "h-good-3", now)]})
        reply = (await post(json.dumps(later)))["payload"]
        assert (reply["acked_id"], reply["accepted"], reply["rejected"]) == (later["id"], 1, 0)

    with psycopg.connect(brain_server.admin_url) as conn:
        tasks = dict(conn.execute("SELECT engine_task_id, args_redacted FROM tasks").fetchall())
    assert set(tasks) == {"h-good-1", "h-nul-1", "h-lone-1", "h-good-2", "h-good-3"}
    assert tasks["h-nul-1"] == ["a\ufffdb"]
    assert tasks["h-lone-1"] == ["x\ufffdy"]
    assert "Traceback" not in brain_server.log_path.read_text(errors="replace")
