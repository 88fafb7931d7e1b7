"""End to end: the real ``agentbus-gateway serve`` process (its own database, config folder and
port, on a NATS server the test starts and stops) and two real sidecars, each with its own
credentials and state folder (made by the sidecar library's init and register). Tests that stop
or kill the gateway or NATS get a stack of their own (``sidecars``); the others share the
module's (``pair``).

The recipient always runs ``agentbus sidecar run`` as a process; the sender is either the CLI or
the sidecar library in this process (``send_message`` queues and tries once, ``sync.flush``
retries what is queued). "Presented exactly once" is read from the recipient's own state.db:
one inbox row per sent id, and presenting the inbox twice yields every message the first time
and none the second.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import shutil
import signal
from pathlib import Path

import pytest
from agentbus.bench.runs import payload_opens
from agentbus.e2e import (
    World,
    assert_exactly_once,
    drain_outbox,
    open_world,
    send_stream,
    until,
    wait_received,
)
from agentbus_sidecar.actions.sending import send_message
from agentbus_sidecar.runtime import Runtime, open_runtime
from agentbus_sidecar.store import outbox

pytestmark = [pytest.mark.timeout(360), pytest.mark.long_module]  # long: run first


async def test_messages_and_a_task_between_two_sidecars(pair: World) -> None:
    stack, alice, bob = pair.stack, pair.alice, pair.bob
    await asyncio.gather(alice.start(), bob.start())

    sent = await alice.cli("send", bob.address, "hello bob", "--title", "greeting")
    assert sent["state"] == "sent", sent
    assert sent["receipt"]["seq"] is not None
    msg_id = sent["msg_id"]
    await wait_received(bob, {msg_id}, 25, stack)  # well below AckWait (30 s)
    listed = await bob.cli("inbox", "--no-sync")
    assert [m for m in listed["messages"] if m["msg_id"] == msg_id], listed
    read = await bob.cli("read", msg_id)
    assert read["acked"] is True
    assert read["envelope"]["data"]["text"] == "hello bob"

    async def status_read() -> bool:
        return await stack.message_status(msg_id) == "read"

    await until(status_read, 20, "the gateway to record the application ack")
    traced = await alice.cli("trace", msg_id)
    assert [e["event"] for e in traced["local"]["events"]][:2] == ["queued", "accepted"]
    steps = [e["event"] for e in traced["remote"]["events"]]
    assert (steps[0], steps[-1]) == ("message.accepted", "message.read"), steps
    by_receipt = await bob.cli("trace", sent["receipt"]["id"])  # bob holds no receipt
    assert by_receipt["remote"]["message"]["id"] == msg_id, by_receipt

    requested = await alice.cli(
        "task", "request", bob.address, "review the patch", "--capability", "code.review"
    )
    assert requested["state"] == "sent", requested
    task_id = requested["task_id"]

    async def request_arrived() -> bool:
        return any(r["transport_acked"] for r in bob.received("agentbus.task.request.v1").values())

    await until(request_arrived, 25, "the task request at bob")
    # alice waits for the outcome while bob works on it
    waiting = asyncio.create_task(alice.cli("task", "wait", task_id, "--timeout", "45"))
    for verb, *args in (
        ("accept", "--note", "on it"),
        ("progress", "half way", "--percent", "50"),
        ("complete", "looks good"),
    ):
        answer = await bob.cli("task", verb, task_id, *args)
        assert answer["state"] == "sent", answer
    waited = await waiting
    assert (waited["outcome"], waited["task"]["state"]) == ("ended", "completed"), waited
    assert waited["task"]["result_msg_id"] is not None, waited
    shown = await alice.cli("task", "show", task_id)
    assert (shown.get("task") or shown)["state"] == "completed", shown

    async def lifecycle_at_alice() -> bool:
        kinds = {r["type"] for r in alice.query("SELECT type FROM inbox WHERE transport_acked")}
        return {
            "agentbus.task.accept.v1",
            "agentbus.task.progress.v1",
            "agentbus.task.complete.v1",
        } <= kinds

    await until(lifecycle_at_alice, 25, "the lifecycle messages at alice")
    for sidecar in (alice, bob):  # both loops heartbeat from their start
        assert await stack.agent_status(sidecar.agent_id) == "online"


async def _killed_mid_stream(world: World) -> list[str]:
    """Alice streams 60 messages to bob; the gateway is killed with SIGKILL after the 20th and
    started again. Every message reaches bob exactly once; the ids sent."""
    stack, alice, bob = world.stack, world.alice, world.bob
    await bob.start()

    async def kill_and_restart() -> None:
        await stack.stop_gateway(signal.SIGKILL)
        await asyncio.sleep(0.5)
        await stack.start_gateway()

    async with open_runtime(alice.credentials, alice.state_dir) as rt:
        sent = await send_stream(rt, bob.address, 60, at=20, fault=kill_and_restart)
        await drain_outbox(rt, 60)
    assert stack.starts == 2
    await wait_received(bob, set(sent), 90, stack)
    assert_exactly_once(bob, sent)
    return sent


async def test_gateway_killed_mid_stream(sidecars: World) -> None:
    await _killed_mid_stream(sidecars)


async def test_gateway_killed_mid_stream_with_inline_payloads(
    agentbus_db: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same with ``AGENTBUS_INLINE_PAYLOADS``: copies published by the send path carry
    their payloads, any the reconciler publishes after the kill do not, and bob gets every
    payload intact either way."""
    monkeypatch.setenv("AGENTBUS_INLINE_PAYLOADS", "true")
    async with open_world(agentbus_db, tmp_path) as world:
        sent = await _killed_mid_stream(world)
        opens = await payload_opens(world.stack.url)  # since the restart
    texts = {row["msg_id"]: json.loads(row["envelope"])["data"]["text"]
             for row in world.bob.query("SELECT msg_id, envelope FROM inbox")}  # fmt: skip
    assert texts == {msg_id: f"message {n}" for n, msg_id in enumerate(sent)}
    assert opens["inline"] > 0


async def test_nats_restarted_mid_stream(sidecars: World) -> None:
    stack, alice, bob = sidecars.stack, sidecars.alice, sidecars.bob
    await bob.start()

    async def restart_nats() -> None:
        await asyncio.to_thread(stack.nats.stop)
        await asyncio.sleep(1.5)
        await asyncio.to_thread(stack.nats.start)

    async with open_runtime(alice.credentials, alice.state_dir) as rt:
        sent = await send_stream(rt, bob.address, 60, at=20, fault=restart_nats)
        await drain_outbox(rt, 60)
    await wait_received(bob, set(sent), 90, stack)
    assert_exactly_once(bob, sent)


async def test_nats_back_without_its_data(sidecars: World) -> None:
    """NATS restarted with an empty store (one that kept no data): the tenant stream, bob's
    consumer and the messages waiting for bob (offline meanwhile) are gone. The gateway creates
    the stream and the consumer again and sends the waiting messages out again; they and every
    message sent after reach bob exactly once."""
    stack, alice, bob = sidecars.stack, sidecars.alice, sidecars.bob
    await bob.start()

    async def send(rt: Runtime, text: str) -> str:
        return str((await send_message(rt, bob.address, {"text": text})).envelope["id"])

    async with open_runtime(alice.credentials, alice.state_dir) as rt:
        before = [await send(rt, f"before {n}") for n in range(3)]
        await wait_received(bob, set(before), 25, stack)
        await bob.stop()
        waiting = [await send(rt, f"waiting {n}") for n in range(2)]
        await drain_outbox(rt, 30)
        await asyncio.to_thread(stack.nats.stop)
        shutil.rmtree(stack.nats.store_dir / "jetstream")
        await asyncio.to_thread(stack.nats.start)
        await bob.start()
        after = [await send(rt, f"after {n}") for n in range(10)]
        await drain_outbox(rt, 60)
    await wait_received(bob, {*waiting, *after}, 60, stack)
    assert_exactly_once(bob, [*before, *waiting, *after])


async def test_recipient_offline_then_back(pair: World) -> None:
    stack, alice, bob = pair.stack, pair.alice, pair.bob
    await bob.start()
    async with open_runtime(alice.credentials, alice.state_dir) as rt:
        first = (await send_message(rt, bob.address, {"text": "before"})).envelope["id"]
        await wait_received(bob, {first}, 25, stack)
        await bob.stop()
        later = [
            (await send_message(rt, bob.address, {"text": f"offline {n}"})).envelope["id"]
            for n in range(20)
        ]
        await drain_outbox(rt, 30)
    assert not (set(later) & set(bob.received()))
    await bob.start()
    # The poll bob's stopped sidecar left behind took nothing, so no AckWait (30 s) is needed.
    await wait_received(bob, {first, *later}, 25, stack)
    assert_exactly_once(bob, [first, *later])


async def test_poll_abandoned_by_its_client_takes_nothing(pair: World) -> None:
    """A long-poll whose client went away stops pulling at once: a message sent just after it
    is not handed to the dead request, and the next sidecar gets it without waiting out the
    consumer's AckWait (30 s)."""
    stack, alice, bob = pair.stack, pair.alice, pair.bob
    async with open_runtime(bob.credentials, bob.state_dir) as rt:
        bearer = await rt.session.bearer()
        poll = asyncio.create_task(rt.client.receive(bearer, 25))
        await asyncio.sleep(1.0)  # the gateway now waits in the poll
        poll.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await poll
    async with open_runtime(alice.credentials, alice.state_dir) as rt:
        outcome = await send_message(rt, bob.address, {"text": "after the poll"})
    assert outcome.state == "sent", outcome.as_dict()
    msg_id = outcome.envelope["id"]
    await asyncio.sleep(1.0)
    assert await stack.message_status(msg_id) == "accepted", "the abandoned poll took it"
    await bob.start()
    await wait_received(bob, {msg_id}, 20, stack)
    assert_exactly_once(bob, [msg_id])


async def test_sender_offline_queues_then_delivers(sidecars: World) -> None:
    stack, alice, bob = sidecars.stack, sidecars.alice, sidecars.bob
    await bob.start()
    await stack.stop_gateway()
    queued = await alice.cli("send", bob.address, "written offline")
    assert queued["state"] == "queued", queued
    msg_id = queued["msg_id"]
    [row] = alice.query("SELECT id, body FROM outbox WHERE kind = 'send'")
    assert row["id"] == msg_id
    await stack.start_gateway()
    await alice.start()
    rows = await wait_received(bob, {msg_id}, 60, stack)
    delivered = json.loads(rows[msg_id]["envelope"])
    assert delivered == json.loads(row["body"]), "the queued bytes are what arrives"

    async def outbox_empty() -> bool:
        return not alice.query("SELECT id FROM outbox WHERE kind = 'send'")

    await until(outbox_empty, 20, "alice's outbox to empty")
    assert_exactly_once(bob, [msg_id])


async def test_a_lane_queued_offline_goes_out_in_batches_and_in_order(sidecars: World) -> None:
    stack, alice, bob = sidecars.stack, sidecars.alice, sidecars.bob
    await bob.start()
    await stack.stop_gateway()
    async with open_runtime(alice.credentials, alice.state_dir) as rt:
        first = await send_message(rt, bob.address, {"text": "message 0"})
        lane = {"conversation": first.envelope["conversation"]}
        sent = [first.envelope["id"]]
        for n in range(1, 150):
            outcome = await send_message(rt, bob.address, {"text": f"message {n}"}, **lane)
            assert outcome.state == "queued", outcome.as_dict()
            sent.append(outcome.envelope["id"])
        # One queued envelope is spoilt: the gateway refuses it, and the rest of its lane in
        # that batch is held and goes with the next flush.
        spoilt = sent[60]
        body = json.loads(outbox.get(rt.conn, spoilt)["body"])  # type: ignore[index]
        body["data"] = {"text": "changed after signing"}
        rt.conn.execute(
            "UPDATE outbox SET body = ? WHERE id = ?", (json.dumps(body).encode(), spoilt)
        )
        await stack.start_gateway()
        await drain_outbox(rt, 60)
        parked = outbox.get(rt.conn, spoilt)
        assert parked is not None
        assert "AB-2011" in str(parked["last_error"])
    delivered = [m for m in sent if m != spoilt]
    await wait_received(bob, set(delivered), 90, stack)
    assert_exactly_once(bob, delivered)
    seqs = [bob.received()[m]["stream_seq"] for m in delivered]
    assert seqs == sorted(seqs), "the lane reached the stream in send order"
