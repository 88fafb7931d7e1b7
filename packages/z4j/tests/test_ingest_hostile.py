"""Hostile agent frames against a real brain: NUL, lone surrogates, numbers past their columns,
JSON nested 100,000 deep, oversize and broken frames. Each is answered so the agent moves on,
the bad event alone is refused or repaired, the connection carries on and nothing else is lost.
"""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime
from typing import Any

import psycopg
from websockets.asyncio.client import ClientConnection
from z4j.testing import BrainProcess
from z4j_agent.protocol import MAX_FRAME_BYTES, FrameSigner, FrameVerifier
from z4j_agent.protocol.frames import LONE_SURROGATE

from .test_agent_protocol import event, handshake


def surrogate_safe_sign(signer: FrameSigner, payload: dict[str, Any]) -> str:
    """A signed frame whose text keeps lone surrogates (as ``\\udXXX`` escapes), signed over
    their U+FFFD form, as a JavaScript or Go agent would."""
    clean = json.loads(LONE_SURROGATE.sub("\ufffd", json.dumps(payload, ensure_ascii=False)))
    frame = signer.sign("event_batch", clean)
    frame["payload"] = payload
    return json.dumps(frame)  # ensure_ascii: lone surrogates become escapes


async def ack_of(ws: ClientConnection, verifier: FrameVerifier) -> dict[str, Any]:
    reply = verifier.verify(json.loads(await ws.recv()))
    assert reply["type"] in {"event_batch_ack", "error"}, reply
    return reply


def raw_frame(frame_id: str, events_text: str) -> str:
    """An event_batch envelope around ``events_text``, the way agents order the members."""
    return (
        f'{{"hmac":"00","id":"{frame_id}","nonce":"n","payload":{{"events":{events_text}}},'
        f'"seq":999,"ts":"2026-01-01T00:00:00Z","type":"event_batch","v":2}}'
    )


async def test_bad_events_alone_are_refused_or_repaired_and_the_stream_goes_on(
    brain_server: BrainProcess,
) -> None:
    creds = await brain_server.new_agent()
    ws, signer, verifier = await handshake(brain_server, creds)
    now = datetime.now(UTC)
    batch = [
        event("task.succeeded", "good-1", now),
        event("task.sent", "nul-1", now, args=["a\x00b"], kwargs={"k\x00": 1}, queue="q\x00"),
        event("task.sent", "lone-1", now, args=["x\ud800y"]),
        event("task.succeeded", "big-1", now, retry_count=2**70),
        event("task.succeeded", "int4-1", now, retry_count=2**40),
        event("task.succeeded", "huge-args-1", now, args=[2**70]),
        event("task.succeeded", "good-2", now),
    ]
    await ws.send(surrogate_safe_sign(signer, {"events": batch}))
    ack = (await ack_of(ws, verifier))["payload"]
    assert ack["received"] == 7
    assert ack["accepted"] == 5
    assert ack["rejected"] == 2
    assert ack["repaired"] == 2
    assert [(r["index"], r["id"], r["reason"]) for r in ack["refused"]] == [
        (3, batch[3]["id"], "data.retry_count: integer out of range"),
        (4, batch[4]["id"], "data.retry_count: integer out of range"),
    ]

    # Frames that cannot be parsed: the batch is acked as refused, so no agent resends it.
    deep_id, big_id = uuid.uuid4().hex, uuid.uuid4().hex
    deep = '[{"kind":"task.sent","data":{"args":' + "[" * 100_000 + "]" * 100_000 + "}}]"
    await ws.send(raw_frame(deep_id, deep))
    reply = await ack_of(ws, verifier)
    assert reply["type"] == "event_batch_ack"
    assert reply["payload"]["acked_id"] == deep_id
    assert "nested deeper than" in reply["payload"]["refused_frame"]
    padding = json.dumps([{"kind": "task.sent", "data": {"args": ["x" * MAX_FRAME_BYTES]}}])
    await ws.send(raw_frame(big_id, padding))
    reply = await ack_of(ws, verifier)
    assert reply["payload"]["acked_id"] == big_id
    assert "larger than" in reply["payload"]["refused_frame"]
    await ws.send('{"id":"broken-1","type":"heartbeat", nope}')
    reply = await ack_of(ws, verifier)
    assert reply["type"] == "error"
    assert reply["payload"]["code"] == "frame_refused"
    assert reply["payload"]["frame_id"] == "broken-1"

    # The same connection carries on.
    later = signer.sign("event_batch", {"events": [event("task.succeeded", "good-3", now)]})
    await ws.send(json.dumps(later))
    ack = (await ack_of(ws, verifier))["payload"]
    assert (ack["acked_id"], ack["accepted"], ack["rejected"]) == (later["id"], 1, 0)
    await ws.close()

    with psycopg.connect(brain_server.admin_url) as conn:
        tasks = {
            row[0]: row[1:]
            for row in conn.execute(
                "SELECT engine_task_id, queue, args_redacted, kwargs_redacted FROM tasks"
            )
        }
        payloads = dict(
            conn.execute(
                "SELECT t.engine_task_id, e.payload FROM events e JOIN tasks t ON t.id = e.task_id"
            ).fetchall()
        )
    assert set(tasks) == {"good-1", "nul-1", "lone-1", "huge-args-1", "good-2", "good-3"}
    assert tasks["nul-1"] == ("q\ufffd", ["a\ufffdb"], {"k\ufffd": 1})
    assert tasks["lone-1"][1] == ["x\ufffdy"]
    assert tasks["huge-args-1"][1] == [2**70]
    assert payloads["nul-1"]["z4j_repaired"] is True
    assert payloads["lone-1"]["z4j_repaired"] is True
    assert "z4j_repaired" not in payloads["good-1"]

    log = brain_server.log_path.read_text(errors="replace")
    assert "Traceback" not in log
    records = [json.loads(line) for line in log.splitlines() if line.startswith("{")]
    refusals = [r for r in records if "refused" in r["msg"]]
    assert all(r["level"] == "warning" and str(creds["agent_id"]) in r["msg"] for r in refusals)
    assert len(refusals) == 5  # two events, three frames: one line each
