"""The transport against a stand-in brain that speaks protocol v2 with the protocol module.

The stand-in brain holds only what the wire contract says (docs/z4j/agent.md); it checks every
agent frame with FrameVerifier and signs its own with FrameSigner, so these tests pin the agent
side of the contract. End-to-end tests against the real brain live with the brain.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from websockets.asyncio.server import ServerConnection, serve
from z4j_agent.buffer import EventBuffer
from z4j_agent.config import AgentConfig
from z4j_agent.events import make_event
from z4j_agent.identity import ProcessIdentity
from z4j_agent.links import LinkClosed
from z4j_agent.protocol import FrameError, FrameSigner, FrameVerifier, Session, unsigned_frame
from z4j_agent.transport import FATAL_DELAY, Transport, backoff_delay, close_delay

SECRET = os.urandom(32)
TOKEN = "agent-token-for-tests"


class StubBrain:
    """Accepts one agent at a time; ``mode`` is ack, silent, tamper or close:<code>."""

    def __init__(self) -> None:
        self.mode = "ack"
        self.events: list[dict[str, Any]] = []
        self.frames: list[dict[str, Any]] = []
        self.hellos: list[dict[str, Any]] = []
        self.closes: list[int | None] = []
        self.connections = 0
        self.send_command = False
        self.command_frame_id = ""

    def new_session(self) -> tuple[Session, dict[str, Any]]:
        self.connections += 1
        session = Session(SECRET, "agent-1", "project-1", f"session-{self.connections}")
        ack = unsigned_frame(
            "hello_ack",
            {
                "brain_version": "test",
                "agent_id": session.agent_id,
                "project_id": session.project_id,
                "session_id": session.session_id,
                "heartbeat_interval_seconds": 1,
                "max_frame_size_bytes": 64 * 1024,
            },
        )
        return session, ack

    def take(
        self, verifier: FrameVerifier, signer: FrameSigner, frame: dict[str, Any]
    ) -> dict[str, Any] | None:
        verifier.verify(frame)
        self.frames.append(frame)
        if frame["type"] != "event_batch" or self.mode == "silent":
            return None
        events = frame["payload"]["events"]
        self.events.extend(events)
        ack = signer.sign(
            "event_batch_ack",
            {
                "acked_id": frame["id"],
                "received": len(events),
                "accepted": len(events),
                "rejected": 0,
            },
        )
        if self.mode == "tamper":
            ack["payload"]["accepted"] = 0
        return ack

    async def handler(self, ws: ServerConnection) -> None:
        if ws.request is None or ws.request.headers.get("Authorization") != f"Bearer {TOKEN}":
            await ws.close(4401, "bad token")
            return
        self.hellos.append(json.loads(await ws.recv()))
        session, ack = self.new_session()
        if self.mode.startswith("close:"):
            await ws.close(int(self.mode[6:]), "test")
            return
        await ws.send(json.dumps(ack))
        signer, verifier = FrameSigner(session), FrameVerifier(session)
        if self.send_command:
            command = signer.sign(
                "command",
                {
                    "command_id": "cmd-1",
                    "action": "retry",
                    "target": {"task_id": "t"},
                    "parameters": {},
                    "timeout_seconds": 30,
                    "issued_by": "test",
                },
            )
            self.command_frame_id = command["id"]
            await ws.send(json.dumps(command))
        try:
            async for message in ws:
                reply = self.take(verifier, signer, json.loads(message))
                if reply is not None:
                    await ws.send(json.dumps(reply))
        finally:
            self.closes.append(ws.close_code)


def config_for(url: str, tmp_path: Path, **changes: Any) -> AgentConfig:
    fields = {
        "brain_url": url,
        "token": TOKEN,
        "hmac_secret": SECRET,
        "buffer_path": tmp_path / "buffer.sqlite3",
        "batch_size": 500,
        "flush_interval": 0.05,
    } | changes
    return AgentConfig(**fields)


def filled_buffer(config: AgentConfig, count: int) -> EventBuffer:
    buffer = EventBuffer(config.buffer_file("x"))
    buffer.append(
        [make_event("task.started", f"t{i}", {"kwargs": {"password": "pw"}}) for i in range(count)]
    )
    return buffer


async def eventually(check: Callable[[], bool], seconds: float = 10.0) -> None:
    for _ in range(int(seconds / 0.05)):
        if check():
            return
        await asyncio.sleep(0.05)
    raise AssertionError("condition not met in time")


@pytest.fixture
async def brain() -> AsyncIterator[tuple[StubBrain, str]]:
    stub = StubBrain()
    async with serve(stub.handler, "127.0.0.1", 0) as server:
        port = server.sockets[0].getsockname()[1]
        yield stub, f"http://127.0.0.1:{port}"


def identity() -> ProcessIdentity:
    return ProcessIdentity(worker_id="celery@test", worker_role="task")


async def test_ships_everything_and_deletes_only_acked(
    brain: tuple[StubBrain, str], tmp_path: Path
) -> None:
    stub, url = brain
    stub.send_command = True
    config = config_for(url, tmp_path)
    buffer = filled_buffer(config, 1200)
    transport = Transport(config, buffer, identity())
    transport.start()
    try:
        await eventually(lambda: buffer.size == 0 and len(stub.events) == 1200)
        await eventually(
            lambda: (
                {"heartbeat", "command_ack", "command_result"} <= {f["type"] for f in stub.frames}
            )
        )
    finally:
        await asyncio.to_thread(transport.stop, 2.0)
    assert len({e["id"] for e in stub.events}) == 1200
    assert all(e["kwargs"] == {"password": "[redacted]"} for e in (x["data"] for x in stub.events))
    batches = [f for f in stub.frames if f["type"] == "event_batch"]
    assert max(len(b["payload"]["events"]) for b in batches) <= 500
    hello = stub.hellos[0]["payload"]
    assert hello["protocol_version"] == "2"
    assert hello["framework"] == "celery"
    assert hello["engines"] == ["celery"]
    assert hello["worker_role"] == "task"
    assert {"worker_id", "worker_pid", "worker_started_at", "host", "capabilities"} <= set(hello)
    heartbeat = next(f for f in stub.frames if f["type"] == "heartbeat")["payload"]
    assert set(heartbeat) == {"buffer_size", "dropped_events", "last_flush_at", "adapter_health"}
    result_frame = next(f for f in stub.frames if f["type"] == "command_result")
    ack_frame = next(f for f in stub.frames if f["type"] == "command_ack")
    # As the z4j agents do: ack and result carry the command frame's id as their own.
    command_frame_id = stub.command_frame_id
    assert result_frame["id"] == ack_frame["id"] == command_frame_id
    assert result_frame["payload"] == {
        "command_id": "cmd-1",
        "status": "failed",
        "result": None,
        "error": "this agent does not carry out 'retry'",
    }
    assert not transport.alive


async def test_unacked_events_stay_in_the_buffer(
    brain: tuple[StubBrain, str], tmp_path: Path
) -> None:
    stub, url = brain
    stub.mode = "silent"
    config = config_for(url, tmp_path)
    buffer = filled_buffer(config, 10)
    transport = Transport(config, buffer, identity())
    transport.start()
    try:
        await eventually(lambda: len([f for f in stub.frames if f["type"] == "event_batch"]) > 0)
    finally:
        await asyncio.to_thread(transport.stop, 1.0)
    assert buffer.size == 10


async def test_a_tampered_ack_closes_with_4403(
    brain: tuple[StubBrain, str], tmp_path: Path
) -> None:
    stub, url = brain
    stub.mode = "tamper"
    config = config_for(url, tmp_path)
    buffer = filled_buffer(config, 5)
    transport = Transport(config, buffer, identity())
    transport.start()
    try:
        await eventually(lambda: 4403 in stub.closes)
    finally:
        await asyncio.to_thread(transport.stop, 1.0)
    assert buffer.size == 5


async def test_a_bad_token_is_logged_and_backs_off_long(
    brain: tuple[StubBrain, str], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    stub, url = brain
    config = config_for(url, tmp_path, token="wrong")
    transport = Transport(config, filled_buffer(config, 1), identity())
    with caplog.at_level(logging.ERROR, logger="z4j_agent"):
        transport.start()
        try:
            await eventually(lambda: "check Z4J_TOKEN" in caplog.text)
            await asyncio.sleep(1.0)
        finally:
            await asyncio.to_thread(transport.stop, 1.0)
    assert stub.connections == 0
    assert caplog.text.count("check Z4J_TOKEN") == 1


def test_close_policy() -> None:
    assert close_delay(LinkClosed(4401), 0) == FATAL_DELAY
    assert close_delay(LinkClosed(4403), 0) == FATAL_DELAY
    assert close_delay(LinkClosed(4426), 0) == FATAL_DELAY
    assert close_delay(LinkClosed(4002), 0) == 30.0
    assert close_delay(LinkClosed(4429, retry_after=90), 0) == 90
    delays = [backoff_delay(n) for n in range(12)]
    assert all(0.5 <= d <= 30.0 for d in delays)
    assert delays[-1] >= 15.0


async def test_only_the_lease_holder_ships(brain: tuple[StubBrain, str], tmp_path: Path) -> None:
    stub, url = brain
    config = config_for(url, tmp_path)
    buffer = filled_buffer(config, 3)
    assert buffer.try_lead("someone-else", ttl=60)
    transport = Transport(config, buffer, identity(), lease_ttl=1.5)
    transport.start()
    try:
        await asyncio.sleep(1.5)
        assert stub.connections == 0
        buffer.release("someone-else")
        await eventually(lambda: buffer.size == 0)
    finally:
        await asyncio.to_thread(transport.stop, 1.0)


class HttpBrain(BaseHTTPRequestHandler):
    """The HTTP fallback contract: hello, events (signed ack), long-polled commands."""

    stub: StubBrain
    state: dict[str, Any]

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _reply(self, status: int, body: dict[str, Any] | None = None) -> None:
        data = b"" if body is None else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _authorised(self) -> bool:
        if self.headers.get("Authorization") != f"Bearer {TOKEN}":
            self._reply(401, {"code": "agent.bad_token"})
            return False
        if (
            self.path != "/api/v1/agent/hello"
            and self.headers.get("X-Z4J-Session") != self.state["session"].session_id
        ):
            self._reply(404, {"code": "agent.session_unknown"})
            return False
        return True

    def do_POST(self) -> None:
        if not self._authorised():
            return
        frame = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if self.path == "/api/v1/agent/hello":
            self.stub.hellos.append(frame)
            session, ack = self.stub.new_session()
            self.state.update(
                session=session,
                signer=FrameSigner(session),
                verifier=FrameVerifier(session),
                commands=[],
            )
            self.state["commands"].append(
                self.state["signer"].sign(
                    "command",
                    {"command_id": "cmd-h", "action": "cancel", "target": {}, "parameters": {}},
                )
            )
            self._reply(200, ack)
            return
        with self.state["lock"]:
            try:
                reply = self.stub.take(self.state["verifier"], self.state["signer"], frame)
            except FrameError:
                self._reply(403, {"code": "agent.bad_signature"})
                return
        self._reply(200, reply) if reply is not None else self._reply(204)

    def do_GET(self) -> None:
        if not self._authorised():
            return
        assert self.path.startswith("/api/v1/agent/commands?wait=30&max_frames=50")
        frames, self.state["commands"] = self.state["commands"], []
        self._reply(200, {"frames": frames})


@pytest.fixture
def http_brain() -> Iterator[tuple[StubBrain, str]]:
    stub = StubBrain()
    handler = type("Handler", (HttpBrain,), {"stub": stub, "state": {"lock": threading.Lock()}})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield stub, f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


async def test_http_fallback_ships_and_answers_commands(
    http_brain: tuple[StubBrain, str], tmp_path: Path
) -> None:
    stub, url = http_brain
    config = config_for(url, tmp_path, transport="http", batch_size=100)
    buffer = filled_buffer(config, 250)
    transport = Transport(config, buffer, identity())
    transport.start()
    try:
        await eventually(lambda: buffer.size == 0 and len(stub.events) == 250)
        await eventually(lambda: "command_result" in {f["type"] for f in stub.frames})
    finally:
        await asyncio.to_thread(transport.stop, 2.0)
    assert stub.hellos[0]["type"] == "hello"
    result = next(f for f in stub.frames if f["type"] == "command_result")["payload"]
    assert result["command_id"] == "cmd-h"
    assert result["status"] == "failed"
    assert result["error"] == "this agent does not carry out 'cancel'"


async def test_http_fallback_bad_token_backs_off_long(
    http_brain: tuple[StubBrain, str], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    stub, url = http_brain
    config = config_for(url, tmp_path, transport="http", token="wrong")
    transport = Transport(config, filled_buffer(config, 1), identity())
    with caplog.at_level(logging.ERROR, logger="z4j_agent"):
        transport.start()
        try:
            await eventually(lambda: "check Z4J_TOKEN" in caplog.text)
        finally:
            await asyncio.to_thread(transport.stop, 1.0)
    assert stub.hellos == []


async def test_an_event_too_large_for_any_frame_is_dropped_and_counted(
    brain: tuple[StubBrain, str], tmp_path: Path
) -> None:
    stub, url = brain  # the stand-in brain allows frames of 64 KiB
    config = config_for(url, tmp_path)
    buffer = EventBuffer(config.buffer_file("x"))
    big = make_event("task.started", "big", {"args": ["x" * 15000] * 6})
    buffer.append([make_event("task.sent", "a", {}), big, make_event("task.sent", "b", {})])
    transport = Transport(config, buffer, identity())
    transport.start()
    try:
        await eventually(lambda: buffer.size == 0)
    finally:
        await asyncio.to_thread(transport.stop, 1.0)
    assert [e["task_id"] for e in stub.events] == ["a", "b"]
    assert buffer.dropped == 1
