"""End to end, push delivery: ``agentbus sidecar run`` holding the gateway's delivery WebSocket
(its default), on the real gateway process, NATS and PostgreSQL (``agentbus.e2e``). The other
end-to-end files run their recipients this way too (a gateway killed mid-stream, NATS
restarted, a recipient offline); these tests cover what only push does: the status of sent
messages, a connection replaced by another receiver, long-polling when asked to, and the
loop's sends as frames on its socket, over HTTP while it has none."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any

import httpx
import pytest
from agentbus.e2e import Sidecar, Stack, World, assert_exactly_once, until, wait_received
from agentbus_sidecar import push
from agentbus_sidecar.actions.sending import send_message, signed
from agentbus_sidecar.clock import format_ts, server_now, utcnow
from agentbus_sidecar.credentials import AgentCredential
from agentbus_sidecar.envelope import MESSAGE
from agentbus_sidecar.errors import GatewayUnreachable
from agentbus_sidecar.runtime import Runtime, open_runtime
from agentbus_sidecar.store import outbox
from agentbus_sidecar.sync import PUSH, run
from prometheus_client.parser import text_string_to_metric_families

pytestmark = [pytest.mark.timeout(240), pytest.mark.long_module]  # long: run first

PUSHED = "receiving over the delivery WebSocket"


async def _pushing(sidecar: Sidecar, connections: int = 1) -> None:
    async def connected() -> bool:
        return sidecar.log().count(PUSHED) >= connections

    await until(connected, 20, f"{sidecar.address} on the delivery WebSocket")


async def _http_requests(stack: Stack, method: str, route: str) -> float:
    """How many ``method route`` requests the gateway has answered (its ``/metrics``)."""
    async with httpx.AsyncClient(base_url=stack.url) as client:
        text = (await client.get("/metrics")).text
    total = 0.0
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            key = (sample.name, sample.labels.get("method"), sample.labels.get("route"))
            if key == ("http_requests_total", method, route):
                total += sample.value
    return total


def _local_events(sidecar: Sidecar, msg_id: str) -> list[str]:
    rows = sidecar.query("SELECT local_events FROM receipts WHERE msg_id = ?", msg_id)
    return [e["event"] for row in rows for e in json.loads(row["local_events"])]


async def test_pushed_messages_and_the_status_of_sent_ones(pair: World) -> None:
    stack, alice, bob = pair.stack, pair.alice, pair.bob
    await asyncio.gather(alice.start(), bob.start())
    await asyncio.gather(_pushing(alice), _pushing(bob))

    acks_before = await _http_requests(stack, "POST", "/v1/inbox/ack")
    sent = await alice.cli("send", bob.address, "pushed to bob")
    assert sent["state"] == "sent", sent
    msg_id = sent["msg_id"]
    await wait_received(bob, {msg_id}, 10, stack)

    async def delivered() -> bool:
        return await stack.message_status(msg_id) == "delivered"

    await until(delivered, 10, "the transport ack at the gateway")
    # the transport ack went as a frame on bob's socket, not as a request
    assert await _http_requests(stack, "POST", "/v1/inbox/ack") == acks_before

    async def delivered_noted() -> bool:
        return "delivered" in _local_events(alice, msg_id)

    await until(delivered_noted, 10, "the delivered notice in alice's receipt")
    read = await bob.cli("read", msg_id)
    assert read["acked"] is True, read

    async def read_noted() -> bool:
        return "read" in _local_events(alice, msg_id)

    await until(read_noted, 10, "the read notice in alice's receipt")
    assert f"{msg_id} read" in alice.log()
    assert _local_events(alice, msg_id).count("read") == 1
    traced = await alice.cli("trace", msg_id)
    assert {"delivered", "read"} <= {e["event"] for e in traced["local"]["events"]}, traced
    assert list(bob.received()) == [msg_id]


async def test_a_replaced_socket_connects_again_and_loses_nothing(pair: World) -> None:
    """Another receiver for the agent (here a long-poll) replaces the socket (close 4002); the
    loop backs off, connects again, and what was sent meanwhile arrives once."""
    stack, alice, bob = pair.stack, pair.alice, pair.bob
    await bob.start()
    await _pushing(bob)
    async with open_runtime(bob.credentials, bob.state_dir) as rt:
        answer = await rt.session.call(rt.client.receive, 1)
    assert answer.get("deliveries") == [], answer

    async def replaced() -> bool:
        return "replaced by another receiver" in bob.log()

    await until(replaced, 10, "bob's loop to see its socket replaced")
    async with open_runtime(alice.credentials, alice.state_dir) as rt:
        sent = [(await send_message(rt, bob.address, {"text": f"after {n}"})).envelope["id"]
                for n in range(5)]  # fmt: skip
    await _pushing(bob, connections=2)
    await wait_received(bob, set(sent), 25, stack)
    assert_exactly_once(bob, sent)


async def test_long_poll_delivery_when_asked(pair: World) -> None:
    stack, alice, bob = pair.stack, pair.alice, pair.bob
    await bob.start(delivery="long-poll")
    async with open_runtime(alice.credentials, alice.state_dir) as rt:
        sent = [(await send_message(rt, bob.address, {"text": f"polled {n}"})).envelope["id"]
                for n in range(3)]  # fmt: skip
    await wait_received(bob, set(sent), 25, stack)
    assert_exactly_once(bob, sent)
    assert PUSHED not in bob.log()


async def test_a_renewed_credential_is_handed_over_on_the_open_socket(pair: World) -> None:
    """The loop (run in this process, on bob's files) renews its credential when a fifth of its
    lifetime is left, and hands the new one over with an ``auth`` frame instead of reconnecting:
    the gateway answers it, and deliveries go on over the same connection."""
    stack, alice, bob = pair.stack, pair.alice, pair.bob
    lines: list[str] = []

    def logged(text: str) -> Callable[[], Awaitable[bool]]:
        async def probe() -> bool:
            return any(text in line for line in lines)

        return probe

    async with open_runtime(bob.credentials, bob.state_dir) as rt:
        stop = asyncio.Event()
        loop = asyncio.create_task(run(rt, stop, delivery=PUSH, log=lines.append))
        try:
            await until(logged(PUSHED), 20, "the delivery WebSocket")
            cached = await rt.session.bearer()
            soon = format_ts(server_now() + timedelta(seconds=100))  # under a fifth of 900 s
            rt.session.creds.agent_credential = AgentCredential(cached, soon, 900)
            async with open_runtime(alice.credentials, alice.state_dir) as sender:
                first = (await send_message(sender, bob.address, {"text": "hi"})).envelope["id"]
                await until(logged("credential renewed on the delivery WebSocket"), 20, "renewal")
                renewed = rt.session.creds.agent_credential
                assert renewed is not None
                assert renewed.access_token != cached
                then = (await send_message(sender, bob.address, {"text": "again"})).envelope["id"]
            await wait_received(bob, {first, then}, 20, stack)
        finally:
            stop.set()
            await asyncio.wait_for(loop, 30)
    assert sum(PUSHED in line for line in lines) == 1, lines  # one connection throughout


async def test_a_gateway_stopping_tells_its_receivers_and_stops_at_once(pair: World) -> None:
    """SIGTERM with alice on the socket and bob in a long-poll of 25 s: the gateway closes the
    socket 1012 and answers the poll with ``draining`` before it waits for open requests, so it
    stops in about a second instead of cutting the poll off after granian's 10 s. Both loops
    come back to the restarted gateway, and what is sent then arrives once."""
    stack, alice, bob = pair.stack, pair.alice, pair.bob
    await asyncio.gather(alice.start(), bob.start(delivery="long-poll"))
    await _pushing(alice)
    await asyncio.sleep(1.0)  # bob's first poll is waiting
    started = asyncio.get_running_loop().time()
    await stack.stop_gateway()
    assert asyncio.get_running_loop().time() - started < 5, stack.log()

    async def told() -> bool:
        return (
            "the gateway is stopping; delivery WebSocket closed" in alice.log()
            and "the gateway is stopping; polling again shortly" in bob.log()
        )

    await until(told, 10, "both loops told of the stop")
    await stack.start_gateway()
    await _pushing(alice, connections=2)
    to_bob = (await alice.cli("send", bob.address, "after the restart"))["msg_id"]
    to_alice = (await bob.cli("send", alice.address, "after the restart too"))["msg_id"]
    await asyncio.gather(
        wait_received(bob, {to_bob}, 30, stack), wait_received(alice, {to_alice}, 30, stack)
    )
    assert_exactly_once(bob, [to_bob])
    assert_exactly_once(alice, [to_alice])


CREDENTIALS = "/v1/agents/{agent_id}/credentials"


async def test_a_starting_loop_issues_one_credential_and_inbox_leaves_its_socket(
    pair: World,
) -> None:
    """The receiver and the flusher both need a credential when the loop starts: they share one
    issue (two would mean an ``auth`` frame at once). ``agentbus inbox`` beside the loop reads
    what the loop stored and does not poll, which would replace the loop's socket."""
    stack, alice, bob = pair.stack, pair.alice, pair.bob
    issued_before = await _http_requests(stack, "POST", CREDENTIALS)
    await bob.start()
    await _pushing(bob)
    await asyncio.sleep(1.5)  # the flusher's first round, with its heartbeat, is done
    assert await _http_requests(stack, "POST", CREDENTIALS) == issued_before + 1
    sent = await alice.cli("send", bob.address, "seen through inbox")
    await wait_received(bob, {sent["msg_id"]}, 10, stack)
    polls_before = await _http_requests(stack, "GET", "/v1/inbox")
    listed = await bob.cli("inbox")
    assert [item["msg_id"] for item in listed["messages"]] == [sent["msg_id"]], listed
    assert await _http_requests(stack, "GET", "/v1/inbox") == polls_before
    await asyncio.sleep(0.5)
    assert "replaced by another receiver" not in bob.log()
    assert "credential renewed" not in bob.log()


BATCH = "/v1/messages/batch"


def _queue(rt: Runtime, to: str, count: int, label: str) -> list[str]:
    """Messages put in the outbox without a try of their own, as the loop finds them, in one
    lane; their ids."""
    conversation = None
    queued: list[str] = []
    for n in range(count):
        envelope = signed(
            rt, type=MESSAGE, recipient=to, data={"text": f"{label} {n}"},
            conversation=conversation,
        )  # fmt: skip
        conversation = envelope["conversation"]
        outbox.enqueue_send(rt.conn, envelope, utcnow())
        queued.append(envelope["id"])
    return queued


async def _replays(stack: Stack) -> float:
    """``agentbus_sends_total{outcome="replayed"}`` of the gateway."""
    async with httpx.AsyncClient(base_url=stack.url) as client:
        text = (await client.get("/metrics")).text
    return sum(
        sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == "agentbus_sends_total" and sample.labels.get("outcome") == "replayed"
    )


async def test_the_loop_sends_on_its_socket(pair: World) -> None:
    """What alice queues, her loop sends as ``send`` frames on its delivery WebSocket: the
    gateway answers no ``POST /v1/messages/batch``, and bob gets each message once."""
    stack, alice, bob = pair.stack, pair.alice, pair.bob
    await asyncio.gather(alice.start(), bob.start())
    await asyncio.gather(_pushing(alice), _pushing(bob))
    batches_before = await _http_requests(stack, "POST", BATCH)
    async with open_runtime(alice.credentials, alice.state_dir) as rt:
        sent = _queue(rt, bob.address, 150, "on the socket")
    await wait_received(bob, set(sent), 30, stack)
    assert_exactly_once(bob, sent)

    async def sent_all() -> bool:
        rows = alice.query("SELECT count(*) AS n FROM outbox WHERE kind = 'send'")
        return int(rows[0]["n"]) == 0

    await until(sent_all, 20, "alice's outbox to empty")
    placeholders = ",".join("?" * len(sent))
    recorded = alice.query(f"SELECT msg_id FROM receipts WHERE msg_id IN ({placeholders})", *sent)
    assert {row["msg_id"] for row in recorded} == set(sent)
    assert await _http_requests(stack, "POST", BATCH) == batches_before


async def test_sends_fall_back_to_http_without_the_socket_and_lose_nothing(
    pair: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Alice's loop (in this process) cannot open its socket at first, as behind a proxy that
    drops the upgrade for a while: what she queues goes over HTTP. Once the socket opens, the
    same flusher sends on it. Then the answer to a send frame is lost with its connection:
    the batch is sent again (on HTTP or the next socket) and answered as a replay. Bob gets
    every message once, and the gateway holds one row of each."""
    stack, alice, bob = pair.stack, pair.alice, pair.bob
    await bob.start()
    await _pushing(bob)
    socket_down = asyncio.Event()
    socket_down.set()
    cut_next_answer = asyncio.Event()
    opened = push.open_socket
    answered = push.DeliverySocket.answer

    async def open_socket(gateway_url: str, bearer: str) -> Any:
        if socket_down.is_set():
            raise GatewayUnreachable(gateway_url, "HTTP 502")
        return await opened(gateway_url, bearer)

    def answer(sock: push.DeliverySocket, frame: dict[str, Any]) -> bool:
        results = frame.get("results") if frame.get("type") == "result" else None
        if cut_next_answer.is_set() and results and "receipt" in results[0]:
            cut_next_answer.clear()  # the answer to a send frame, lost with the connection
            asyncio.get_running_loop().create_task(sock.ws.close())
            return True
        return answered(sock, frame)

    monkeypatch.setattr(push, "open_socket", open_socket)
    monkeypatch.setattr(push.DeliverySocket, "answer", answer)
    lines: list[str] = []

    async def logged(text: str) -> bool:
        return any(text in line for line in lines)

    async with open_runtime(alice.credentials, alice.state_dir) as rt:
        stop = asyncio.Event()
        loop = asyncio.create_task(run(rt, stop, delivery=PUSH, log=lines.append))
        try:
            batches = await _http_requests(stack, "POST", BATCH)
            over_http = _queue(rt, bob.address, 20, "over HTTP")
            await wait_received(bob, set(over_http), 30, stack)
            assert await _http_requests(stack, "POST", BATCH) > batches
            assert not await logged(PUSHED)

            socket_down.clear()
            await until(lambda: logged(PUSHED), 60, "alice's delivery WebSocket")
            batches = await _http_requests(stack, "POST", BATCH)
            on_socket = _queue(rt, bob.address, 20, "on the socket")
            await wait_received(bob, set(on_socket), 30, stack)
            assert await _http_requests(stack, "POST", BATCH) == batches

            replays = await _replays(stack)
            cut_next_answer.set()
            cut_off = _queue(rt, bob.address, 20, "cut off")
            await wait_received(bob, set(cut_off), 60, stack)
            assert not cut_next_answer.is_set(), "an answer was cut off"
            await until(lambda: logged("delivery WebSocket closed"), 10, "the cut connection")

            async def resent() -> bool:
                return not outbox.pending_sends(rt.conn)

            await until(resent, 30, "alice's outbox to empty")
            assert await _replays(stack) >= replays + 1
        finally:
            stop.set()
            await asyncio.wait_for(loop, 30)
    sent = over_http + on_socket + cut_off
    assert_exactly_once(bob, sent)
    rows = await stack.value(
        "SELECT count(*) FROM messages WHERE id = ANY(%s)",
        [uuid.UUID(hex=msg_id.removeprefix("msg_")) for msg_id in sent],
    )
    assert rows == len(sent)
