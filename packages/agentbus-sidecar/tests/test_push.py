"""Push delivery's parts that need no gateway: where the WebSocket is, what a server that does
not upgrade means, settle and send frames that are answered, refused, left unanswered or cut
off, the flusher's use of the socket (sends only where the hello names them), and status
notices on receipts. The delivery itself is tested end to end
against the real gateway (packages/agentbus/tests/test_e2e_sidecar_push.py)."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest
from agentbus_sidecar import push
from agentbus_sidecar.actions.sending import signed
from agentbus_sidecar.clock import format_ts, utcnow
from agentbus_sidecar.credentials import AgentCredential, save_credentials
from agentbus_sidecar.doctor import run_checks
from agentbus_sidecar.envelope import MESSAGE
from agentbus_sidecar.errors import GatewayError, GatewayUnreachable
from agentbus_sidecar.outbound import FlushReport, Uplink, flush_sends
from agentbus_sidecar.push import DeliverySocket, PushUnavailable, open_socket, socket_url
from agentbus_sidecar.runtime import open_runtime
from agentbus_sidecar.store import outbox, receipts
from hypothesis import given
from hypothesis import strategies as st
from websockets.asyncio.server import ServerConnection, serve

PEER = "agent://acme/platform/reviewer"


@pytest.mark.parametrize(
    ("gateway", "socket"),
    [
        ("http://127.0.0.1:8080", "ws://127.0.0.1:8080/v1/inbox/ws"),
        ("https://bus.example.com", "wss://bus.example.com/v1/inbox/ws"),
        ("https://bus.example.com/agentbus/", "wss://bus.example.com/agentbus/v1/inbox/ws"),
    ],
)
def test_the_socket_is_beside_the_gateway_url(gateway: str, socket: str) -> None:
    assert socket_url(gateway) == socket


@given(st.sampled_from(["ftp", "file", "ws", ""]))
def test_only_http_gateways_have_a_socket(scheme: str) -> None:
    with pytest.raises(ValueError, match="not an http"):
        socket_url(f"{scheme}://bus.example.com" if scheme else "bus.example.com")


async def _answering(status: int, healthz: int | None = None) -> AsyncIterator[str]:
    """A plain HTTP server that answers every request with ``status`` (a proxy or an old
    gateway that does not upgrade), and ``GET /healthz`` with ``healthz`` if given."""

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        code = healthz if healthz and head.startswith(b"GET /healthz ") else status
        writer.write(f"HTTP/1.1 {code} Nope\r\nContent-Length: 0\r\n\r\n".encode())
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(answer, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    async with server:
        yield f"http://127.0.0.1:{port}"


@pytest.mark.parametrize("status", [400, 404, 426])
async def test_a_server_that_does_not_upgrade_means_no_push(status: int) -> None:
    async for url in _answering(status):
        with pytest.raises(PushUnavailable, match=f"HTTP {status}"):
            await open_socket(url, "credential")


@pytest.mark.parametrize("status", [502, 503])
async def test_a_proxy_without_its_gateway_is_an_outage(status: int) -> None:
    async for url in _answering(status):
        with pytest.raises(GatewayUnreachable, match=f"HTTP {status}"):
            await open_socket(url, "credential")


async def test_doctor_warns_when_the_upgrade_does_not_reach_the_gateway(agent: Any) -> None:
    async for url in _answering(404, healthz=200):
        save_credentials(agent.creds_path, replace(agent.creds, gateway_url=url))
        checks = {c.name: c for c in await run_checks(agent.creds_path, agent.state_dir)}
    assert checks["gateway"].status == "ok"
    assert checks["delivery WebSocket"].status == "warn"
    assert "HTTP 404" in checks["delivery WebSocket"].detail
    assert "long-polls" in checks["delivery WebSocket"].detail


async def test_nothing_listening_is_an_outage(dead_gateway: str) -> None:
    with pytest.raises(GatewayUnreachable):
        await open_socket(dead_gateway, "credential")


def _receipt(db: sqlite3.Connection, rcp_id: str, msg_id: str) -> None:
    stamp = "2026-12-01T10:00:00.000Z"
    envelope = {"id": msg_id, "recipient": PEER, "type": "agentbus.message.v1"}
    receipt = {"id": rcp_id, "seq": 7}
    receipts.record(db, receipt, envelope, queued_at=stamp, accepted_at=stamp)


def _events(db: sqlite3.Connection, msg_id: str) -> list[str]:
    row = receipts.find(db, msg_id)
    assert row is not None
    return [e["event"] for e in receipts.events_of(row)]


def test_a_status_is_noted_once_on_the_newest_receipt(db: sqlite3.Connection) -> None:
    _receipt(db, "rcp_01", "msg_a")
    _receipt(db, "rcp_02", "msg_a")  # a replay brought a newer receipt
    assert receipts.note_status(db, "msg_a", "delivered", utcnow())
    assert receipts.note_status(db, "msg_a", "read", utcnow())
    assert not receipts.note_status(db, "msg_a", "read", utcnow())  # notices may repeat
    assert _events(db, "msg_a") == ["queued", "accepted", "published", "delivered", "read"]
    older = db.execute("SELECT local_events FROM receipts WHERE rcp_id = 'rcp_01'").fetchone()
    assert "delivered" not in older[0]


def test_a_status_of_someone_elses_message_is_ignored(db: sqlite3.Connection) -> None:
    _receipt(db, "rcp_01", "msg_a")
    assert not receipts.note_status(db, "msg_b", "read", utcnow())
    assert not receipts.note_status(db, "rcp_01", "read", utcnow())  # ids of messages only
    assert _events(db, "msg_a") == ["queued", "accepted", "published"]


Answer = Callable[[ServerConnection, dict[str, Any]], Awaitable[None]]


async def _against(answer: Answer, use: Callable[[DeliverySocket], Awaitable[Any]]) -> Any:
    """``use`` a ``DeliverySocket`` to a server that answers each frame with ``answer`` (a
    stand-in for the gateway's side of §5.2, to reach the failure cases)."""

    async def handler(conn: ServerConnection) -> None:
        async for text in conn:
            await answer(conn, json.loads(text))

    async with serve(handler, "127.0.0.1", 0, subprotocols=["agentbus.v1"]) as server:  # type: ignore[list-item]
        port = next(iter(server.sockets)).getsockname()[1]
        url = f"http://127.0.0.1:{port}"
        ws = await open_socket(url, "credential")
        socket = DeliverySocket(ws, "credential", url)
        frames: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()
        reader = asyncio.create_task(socket.read(frames))
        try:
            return await use(socket)
        finally:
            reader.cancel()
            await ws.close()


async def _settle_against(answer: Answer, verb: str, items: list[dict[str, Any]]) -> Any:
    """``DeliverySocket.settle`` against a server answering with ``answer``."""
    return await _against(answer, lambda socket: socket.settle(verb, items))


async def test_a_settle_frame_carries_the_items_and_returns_the_results() -> None:
    seen: list[dict[str, Any]] = []

    async def answer(conn: ServerConnection, frame: dict[str, Any]) -> None:
        seen.append(frame)
        await conn.send(json.dumps({"type": "status", "msg_id": "msg_x", "status": "read"}))
        results = [{"msg_id": a["msg_id"], "result": "ok"} for a in frame["acks"]]
        await conn.send(json.dumps({"type": "result", "for": frame["id"], "results": results}))

    items = [{"msg_id": "msg_a", "ack_token": "t"}]
    assert await _settle_against(answer, "ack", items) == [{"msg_id": "msg_a", "result": "ok"}]
    assert [(f["type"], f["acks"]) for f in seen] == [("ack", items)]


async def test_a_refused_settle_frame_is_the_gateway_error_it_names() -> None:
    async def answer(conn: ServerConnection, frame: dict[str, Any]) -> None:
        problem = {"status": 422, "code": "AB-5009", "title": "Too many items"}
        await conn.send(json.dumps({"type": "result", "for": frame["id"], "problem": problem}))

    with pytest.raises(GatewayError) as refused:
        await _settle_against(answer, "read", [{"msg_id": "msg_a"}])
    assert (refused.value.status, refused.value.code) == (422, "AB-5009")


async def test_an_unanswered_settle_frame_is_an_outage(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(push, "ANSWER_TIMEOUT_S", 0.2)

    async def answer(conn: ServerConnection, frame: dict[str, Any]) -> None:
        await conn.send(json.dumps({"type": "result", "for": "someone else", "results": []}))

    with pytest.raises(GatewayUnreachable, match="no answer to a nak frame"):
        await _settle_against(answer, "nak", [{"msg_id": "msg_a"}])


async def test_a_socket_closed_before_the_answer_is_an_outage() -> None:
    async def answer(conn: ServerConnection, frame: dict[str, Any]) -> None:
        await conn.close(1012)

    with pytest.raises(GatewayUnreachable, match="no answer to a term frame"):
        await _settle_against(answer, "term", [{"msg_id": "msg_a"}])


async def test_a_deliveries_frame_is_read_as_one_delivery_frame_each() -> None:
    """Under agentbus.v2 a pull's deliveries come in one frame; the reader hands the loop one
    ``delivery`` frame each, as agentbus.v1 sends them, in order and beside other frames."""
    pushed = [
        {"type": "deliveries", "deliveries": [{"msg_id": "msg_a"}, {"msg_id": "msg_b"}]},
        {"type": "status", "msg_id": "msg_x", "status": "read"},
        {"type": "delivery", "msg_id": "msg_c"},
        {"type": "deliveries", "deliveries": "not a list"},
    ]

    async def handler(conn: ServerConnection) -> None:
        for frame in pushed:
            await conn.send(json.dumps(frame))
        await conn.close()

    offered = ["agentbus.v2", "agentbus.v1"]
    async with serve(handler, "127.0.0.1", 0, subprotocols=offered) as server:  # type: ignore[arg-type]
        url = f"http://127.0.0.1:{next(iter(server.sockets)).getsockname()[1]}"
        ws = await open_socket(url, "credential")
        assert ws.subprotocol == "agentbus.v2"
        frames: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()
        await DeliverySocket(ws, "credential", url).read(frames)
    got = [frames.get_nowait() for _ in range(frames.qsize())]
    assert got == [
        {"type": "delivery", "msg_id": "msg_a"},
        {"type": "delivery", "msg_id": "msg_b"},
        {"type": "status", "msg_id": "msg_x", "status": "read"},
        {"type": "delivery", "msg_id": "msg_c"},
        None,
    ]


def _envelopes(count: int) -> list[bytes]:
    """Stored envelope bytes as the outbox keeps them (canonical JSON)."""
    return [json.dumps({"id": f"msg_{n}", "data": {"text": "é"}}).encode() for n in range(count)]


async def test_a_send_frame_carries_the_stored_envelopes_and_returns_their_results() -> None:
    seen: list[dict[str, Any]] = []

    async def answer(conn: ServerConnection, frame: dict[str, Any]) -> None:
        seen.append(frame)
        results = [{"status": 202, "message": {"id": env["id"]}} for env in frame["envelopes"]]
        await conn.send(json.dumps({"type": "result", "for": frame["id"], "results": results}))

    bodies = _envelopes(3)
    results = await _against(answer, lambda socket: socket.send_batch(bodies))
    assert [r["message"]["id"] for r in results] == ["msg_0", "msg_1", "msg_2"]
    assert seen == [{"type": "send", "id": "c1", "envelopes": [json.loads(b) for b in bodies]}]


async def test_a_refused_send_frame_is_the_gateway_error_it_names() -> None:
    async def answer(conn: ServerConnection, frame: dict[str, Any]) -> None:
        problem = {"status": 403, "code": "AB-1007", "title": "Scope missing"}
        await conn.send(json.dumps({"type": "result", "for": frame["id"], "problem": problem}))

    with pytest.raises(GatewayError) as refused:
        await _against(answer, lambda socket: socket.send_batch(_envelopes(1)))
    assert (refused.value.status, refused.value.code) == (403, "AB-1007")
    assert refused.value.caller_refused


async def test_a_send_frame_cut_off_leaves_its_batch_queued_for_a_retry(agent: Any) -> None:
    """The socket closes before the answer: the batch is retried later exactly as after an
    HTTP request that got no answer (the gateway answers what it took as a replay)."""

    async def answer(conn: ServerConnection, frame: dict[str, Any]) -> None:
        await conn.close(1012)

    async with open_runtime(agent.creds_path, agent.state_dir) as rt:
        queued = [
            signed(rt, type=MESSAGE, recipient=PEER, data={"text": f"m{n}"}) for n in range(3)
        ]
        for envelope in queued:
            outbox.enqueue_send(rt.conn, envelope, utcnow())
        report = FlushReport()

        async def flush_on(socket: DeliverySocket) -> None:
            await flush_sends(rt, utcnow(), report, send_batch=socket.send_batch)

        await _against(answer, flush_on)
        assert report.sent == []
        assert report.unreachable is not None
        assert "no answer to a send frame" in report.unreachable
        for envelope in queued:
            row = outbox.get(rt.conn, envelope["id"])
            assert row is not None
            assert row["attempts"] == 1
            assert row["next_attempt_at"] > row["created_at"]
            assert row["next_attempt_at"] != outbox.PARKED


def _hello_server(frames: list[str] | None) -> Callable[[ServerConnection], Awaitable[None]]:
    """A gateway that says hello (naming ``frames`` when given, as an older one does not),
    then takes whatever comes."""

    async def handler(conn: ServerConnection) -> None:
        hello: dict[str, Any] = {"type": "hello", "connection_id": "x", "server_time": "bad"}
        if frames is not None:
            hello["frames"] = frames
        await conn.send(json.dumps(hello))
        async for _text in conn:
            pass

    return handler


@pytest.mark.parametrize(
    ("frames", "sends_on_socket"),
    [(["credit", "ack", "nak", "term", "read", "send", "auth", "ping", "pong"], True),
     (None, False)],
)  # fmt: skip
async def test_the_flusher_sends_on_the_socket_when_the_gateway_takes_send_frames(
    agent: Any, frames: list[str] | None, sends_on_socket: bool
) -> None:
    """While the loop's receiver holds the socket, the flusher settles on it, and sends its
    batches on it only if the hello named ``send``; once it is closed, HTTP again."""
    offered = ["agentbus.v2", "agentbus.v1"]
    async with serve(_hello_server(frames), "127.0.0.1", 0, subprotocols=offered) as server:  # type: ignore[arg-type]
        url = f"http://127.0.0.1:{next(iter(server.sockets)).getsockname()[1]}"
        cached = AgentCredential("credential", format_ts(utcnow() + timedelta(hours=1)), 900)
        save_credentials(agent.creds_path, replace(agent.creds, gateway_url=url,
                                                   agent_credential=cached))  # fmt: skip
        uplink, stop, lines = Uplink(), asyncio.Event(), list[str]()
        async with open_runtime(agent.creds_path, agent.state_dir) as rt:
            receiver = asyncio.create_task(
                push.receive_pushed(rt, stop, asyncio.Lock(), lines.append, uplink)
            )
            try:
                for _ in range(200):
                    if uplink.settle is not None:
                        break
                    await asyncio.sleep(0.05)
                assert uplink.settle is not None, lines
                assert (uplink.send_batch is not None) is sends_on_socket
            finally:
                stop.set()
                await asyncio.wait_for(receiver, 30)
        assert (uplink.settle, uplink.send_batch) == (None, None)
