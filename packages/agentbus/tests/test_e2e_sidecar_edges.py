"""End to end, the sidecar's edges against the real gateway process (``agentbus.e2e``): a
rejected or ageing credential, a send refused for good, the send rate limit, a repeated task
request, a message that expires before its recipient comes back, registering again, a failed
refresh, a reused idempotency key, a cancelled task completed anyway, an envelope in another
agent's name, ``agentbus doctor``, a delivery altered on the way, a delivery over the unread
cap, a receipt without a sequence holding its lane, a redelivery after a lost transport ack,
a transport ack that loses to the expiry sweep, a sidecar whose clock is ten minutes off
(run under ``faketime``), and a key rotated near its end, also after a rotation cut short.
Each test has agents of its own (``pair``) on one stack for the module; the tests that change
the tenant's limits or stop NATS have stacks of their own."""

from __future__ import annotations

import asyncio
import contextlib
import json
import shutil
import sqlite3
import time
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from agentbus.e2e import (
    Sidecar,
    Stack,
    World,
    assert_exactly_once,
    drain_outbox,
    until,
    wait_received,
)
from agentbus_sidecar.actions.sending import queue_and_try, send_message
from agentbus_sidecar.clock import format_ts, parse_ts, server_now, utcnow
from agentbus_sidecar.credentials import save_credentials
from agentbus_sidecar.envelope import MESSAGE, build_envelope, sign_envelope
from agentbus_sidecar.inbound import REFUSED, accept_deliveries
from agentbus_sidecar.keys import generate_key, key_proof, private_key_pem, public_key_b64url
from agentbus_sidecar.runtime import Runtime, open_runtime
from agentbus_sidecar.store import outbox
from agentbus_sidecar.sync import flush
from platformkit.testing.services import service_missing

pytestmark = [pytest.mark.timeout(360), pytest.mark.long_module]  # long: run first


def cached_credential(path: Path) -> dict[str, object]:
    cached: dict[str, object] = json.loads(path.read_text())["agent_credential"]
    return cached


def set_cached_credential(path: Path, **members: object) -> None:
    raw = json.loads(path.read_text())
    raw["agent_credential"] = {**raw["agent_credential"], **members}
    path.write_text(json.dumps(raw))


async def test_a_rejected_credential_is_renewed_once_and_the_send_goes_through(
    pair: World,
) -> None:
    alice, bob = pair.alice, pair.bob
    await alice.cli("send", bob.address, "first")  # caches a credential
    far = format_ts(utcnow() + timedelta(days=1))
    set_cached_credential(alice.credentials, access_token="not-a-credential", expires_at=far)

    sent = await alice.cli("send", bob.address, "after a refused credential")

    assert sent["state"] == "sent", sent
    renewed = cached_credential(alice.credentials)
    assert renewed["access_token"] != "not-a-credential"
    assert await pair.stack.message_status(sent["msg_id"]) == "accepted"


async def test_a_credential_near_its_end_is_replaced_before_use(pair: World) -> None:
    alice, bob = pair.alice, pair.bob
    await alice.cli("send", bob.address, "first")
    old = cached_credential(alice.credentials)["access_token"]
    soon = format_ts(utcnow() + timedelta(seconds=60))  # inside the last fifth of 900 s
    set_cached_credential(alice.credentials, expires_at=soon)

    sent = await alice.cli("send", bob.address, "with a refreshed credential")

    assert sent["state"] == "sent", sent
    fresh = cached_credential(alice.credentials)
    assert fresh["access_token"] != old
    assert str(fresh["expires_at"]) > soon


async def test_a_send_refused_for_good_is_parked_reported_and_dropped(pair: World) -> None:
    alice = pair.alice
    nobody = "agent://acme/main/nobody"

    refused = (await alice.cli("send", nobody, "to no one", expect=4))["error"]

    msg_id = refused["msg_id"]
    assert refused["state"] == "failed", refused
    assert "refused for good" in refused["message"]
    assert await pair.stack.message_status(msg_id) is None  # the gateway stored nothing
    (row,) = (await alice.cli("outbox"))["outbox"]
    assert (row["id"], row["state"], row["next_attempt_at"]) == (msg_id, "failed", None)
    assert "AB-3002" in row["last_error"]  # no such recipient
    checks = {c["name"]: c for c in (await alice.cli("doctor"))["checks"]}
    assert checks["outbox failed"]["status"] == "warn"

    await alice.cli("outbox", "--drop", msg_id)

    assert (await alice.cli("outbox"))["outbox"] == []


async def test_rate_limited_sends_wait_their_turn_and_then_go_out(sidecars: World) -> None:
    stack, alice, bob = sidecars.stack, sidecars.alice, sidecars.bob
    await stack.override_limits({"publish_per_minute": 30})
    await bob.start()
    sent, deferred = [], []
    async with open_runtime(alice.credentials, alice.state_dir) as rt:
        for n in range(34):
            outcome = await send_message(rt, bob.address, {"text": f"message {n}"})
            sent.append(outcome.envelope["id"])
            if outcome.state == "queued":
                deferred.append(outcome)
        assert deferred, "some sends met the limit"
        assert all(o.detail and "AB-5003" in o.detail for o in deferred), deferred[0].detail
        waiting = {r["id"]: r for r in outbox.rows(rt.conn)}
        assert {o.envelope["id"] for o in deferred} <= set(waiting)
        assert all(r["next_attempt_at"] > format_ts(utcnow()) for r in waiting.values())
        await drain_outbox(rt, within=120)
    await wait_received(bob, set(sent), 60, stack)
    await bob.stop()
    assert_exactly_once(bob, sent)


async def test_a_repeated_task_request_is_the_same_task(pair: World) -> None:
    alice, bob = pair.alice, pair.bob
    ask = ("task", "request", bob.address, "review the patch", "--capability", "code.review")

    first = await alice.cli(*ask, "--idempotency-key", "review-42")
    again = await alice.cli(*ask, "--idempotency-key", "review-42")

    assert first["state"] == "sent", first
    assert again["state"] == "sent", again
    assert first["task_id"] == "tsk_" + first["msg_id"].removeprefix("msg_")
    assert (again["task_id"], again["repeat_of"]) == (first["task_id"], first["msg_id"])
    assert again["receipt"]["id"] == first["receipt"]["id"]
    assert "repeat_of" not in first
    shown = await alice.cli("task", "show", again["task_id"])
    assert shown["id"] == first["task_id"]
    assert await pair.stack.message_status(again["msg_id"]) is None  # neither stored nor sent


async def test_a_message_that_expires_before_its_recipient_returns_is_never_presented(
    pair: World,
) -> None:
    stack, alice, bob = pair.stack, pair.alice, pair.bob
    # Five seconds leave a loaded machine time to start the CLI and reach the gateway before
    # the message expires (it must be accepted first); then wait past the expiry.
    sent_at = time.monotonic()
    short = await alice.cli("send", bob.address, "soon stale", "--expires-in", "5")
    await asyncio.sleep(max(0.0, sent_at + 5.5 - time.monotonic()))
    lasting = await alice.cli("send", bob.address, "still fresh")

    await bob.start()
    await wait_received(bob, {lasting["msg_id"]}, 60, stack)

    # never handed out; the expiry sweep (every 60 s) marks the row expired later
    assert await stack.message_status(short["msg_id"]) in {"accepted", "expired"}
    assert short["msg_id"] not in bob.received()
    assert_exactly_once(bob, [lasting["msg_id"]])


async def test_doctor_against_a_live_gateway(pair: World) -> None:
    report = await pair.alice.cli("doctor")

    checks = {c["name"]: c["status"] for c in report["checks"]}
    assert {
        "credentials",
        "agent key",
        "key expiry",
        "registration",
        "gateway",
        "key at gateway",
        "clock skew",
        "sidecar loop",
        "delivery WebSocket",
    } <= set(checks)
    assert set(checks.values()) == {"ok"}, report
    loop = {c["name"]: c["detail"] for c in report["checks"]}["sidecar loop"]
    assert loop.startswith("not running"), report
    await pair.alice.start()
    try:

        async def loop_reported() -> bool:  # once the new process has taken the lock
            checks = {c["name"]: c for c in (await pair.alice.cli("doctor"))["checks"]}
            return checks["sidecar loop"]["detail"].startswith("running")

        await until(loop_reported, 30, f"doctor reporting the loop\n{pair.alice.log()}", 0.5)

        async def pushing() -> bool:
            return "receiving over the delivery WebSocket" in pair.alice.log()

        await until(pushing, 20, "alice's loop on its socket")
        probed = {c["name"]: c for c in (await pair.alice.cli("doctor"))["checks"]}
        assert probed["delivery WebSocket"]["status"] == "ok", probed
        await asyncio.sleep(1.0)
        # the upgrade probe did not take the loop's place as the agent's receiver
        assert "replaced by another receiver" not in pair.alice.log(), pair.alice.log()
    finally:
        await pair.alice.stop()


async def test_registering_again_with_the_same_key_keeps_the_agent(pair: World) -> None:
    alice = pair.alice
    before = json.loads(alice.credentials.read_text())

    again = await alice.cli("register")

    after = json.loads(alice.credentials.read_text())
    assert again["agent"]["id"] == before["agent_id"] == after["agent_id"]
    assert after["key_id"] == before["key_id"]
    sent = await alice.cli("send", pair.bob.address, "still the same agent")
    assert sent["state"] == "sent", sent


async def test_a_failed_refresh_falls_back_to_a_fresh_credential(pair: World) -> None:
    alice, bob = pair.alice, pair.bob
    await alice.cli("send", bob.address, "first")
    soon = format_ts(utcnow() + timedelta(seconds=60))  # due for refresh ...
    set_cached_credential(alice.credentials, access_token="not-a-credential", expires_at=soon)

    sent = await alice.cli("send", bob.address, "after a refused refresh")  # ... which fails

    assert sent["state"] == "sent", sent
    assert cached_credential(alice.credentials)["access_token"] != "not-a-credential"


async def test_a_task_request_reusing_a_key_for_other_work_is_refused_and_parked(
    pair: World,
) -> None:
    alice, bob = pair.alice, pair.bob
    ask = ("task", "request", bob.address, "--capability", "code.review")
    first = await alice.cli(*ask, "review the patch", "--idempotency-key", "review-7")

    refused = (
        await alice.cli(*ask, "review another patch", "--idempotency-key", "review-7", expect=4)
    )["error"]

    assert first["state"] == "sent", first
    assert "AB-6002" in refused["message"]
    (row,) = (await alice.cli("outbox"))["outbox"]
    assert (row["id"], row["state"]) == (refused["msg_id"], "failed")
    assert await pair.stack.message_status(refused["msg_id"]) is None
    never = "tsk_" + refused["msg_id"].removeprefix("msg_")  # the task it would have made
    waited = await alice.cli("task", "wait", never, "--timeout", "10", expect=1)
    assert (waited["outcome"], waited["task"]) == ("refused", None), waited
    assert "AB-6002" in waited["detail"], waited


async def test_a_task_wait_ends_with_the_time_or_with_a_refusal(pair: World) -> None:
    """``task wait`` answers 6 when the time runs out before the task ends, 1 once it ended
    other than completed (bob rejects it), and 4 for a task that does not exist (AB-6001)."""
    alice, bob = pair.alice, pair.bob
    asked = await alice.cli(
        "task", "request", bob.address, "port it", "--capability", "code.review"
    )
    task_id = asked["task_id"]

    timed_out = await alice.cli("task", "wait", task_id, "--timeout", "1", expect=6)

    assert timed_out["outcome"] == "timed_out", timed_out
    assert timed_out["task"]["state"] in ("submitted", "delivered"), timed_out
    await bob.cli("inbox")
    await bob.cli("task", "reject", task_id, "--code", "out_of_scope", "--message", "not mine")
    refused = await alice.cli("task", "wait", task_id, "--timeout", "30", expect=1)
    assert (refused["outcome"], refused["task"]["state"]) == ("ended", "rejected"), refused
    stranger = "tsk_" + "0" * 12 + "7" + "0" * 19
    unknown = await alice.cli("task", "wait", stranger, "--timeout", "5", expect=4)
    assert unknown["error"]["code"] == "AB-6001", unknown


async def test_wait_reply_receives_the_answer_itself_or_through_the_running_loop(
    pair: World,
) -> None:
    """Without a running sidecar, ``wait-reply`` receives for itself until bob's answer comes;
    with one, it watches what the loop stores; with no answer it exits 6 when the time is up."""
    alice, bob = pair.alice, pair.bob
    question = (await alice.cli("send", bob.address, "which branch?"))["msg_id"]
    waiting = asyncio.create_task(alice.cli("wait-reply", question, "--timeout", "45"))
    await bob.cli("inbox")
    answer_id = (await bob.cli("reply", question, "main"))["msg_id"]

    got = await waiting

    assert got["envelope"]["id"] == answer_id, got
    assert (got["envelope"]["correlation"], got["envelope"]["data"]["text"]) == (question, "main")
    assert got["acked"] is True, got
    await alice.start()
    try:

        async def loop_runs() -> bool:  # it logs this holding the agent's lock
            return "running against" in alice.log()

        await until(loop_runs, 30, f"alice's sidecar loop\n{alice.log()}")
        second = (await alice.cli("send", bob.address, "and the tag?"))["msg_id"]
        await bob.cli("inbox")
        await bob.cli("reply", second, "v1.2")
        through_loop = await alice.cli("wait-reply", second, "--timeout", "30", "--no-ack")
        assert through_loop["envelope"]["data"]["text"] == "v1.2", through_loop
        assert through_loop["acked"] is False
        third = (await alice.cli("send", bob.address, "anything else?"))["msg_id"]
        silent = await alice.cli("wait-reply", third, "--timeout", "1", expect=6)
        assert silent["envelope"] is None, silent
    finally:
        await alice.stop()


async def test_completing_a_cancelled_task_is_refused_and_parked(pair: World) -> None:
    alice, bob = pair.alice, pair.bob
    await bob.start()
    asked = await alice.cli(
        "task", "request", bob.address, "review it", "--capability", "code.review"
    )
    task_id = asked["task_id"]

    async def request_arrived() -> bool:
        return asked["msg_id"] in bob.received("agentbus.task.request.v1")

    await until(request_arrived, 60, "the task request at bob")
    await bob.stop()
    await alice.cli("task", "cancel", task_id, "--reason", "not needed")

    refused = (await bob.cli("task", "complete", task_id, "done anyway", expect=4))["error"]

    assert "AB-6003" in refused["message"]
    shown = await alice.cli("task", "show", task_id)
    assert shown["state"] == "cancelled"
    (row,) = (await bob.cli("outbox"))["outbox"]
    assert row["state"] == "failed"


async def test_an_envelope_in_another_agents_name_is_refused_and_parked(pair: World) -> None:
    alice, bob = pair.alice, pair.bob
    async with open_runtime(alice.credentials, alice.state_dir) as rt:
        unsigned = build_envelope(
            type=MESSAGE, source=bob.address, recipient=bob.address,
            data={"text": "from bob, says alice"}, key_id=rt.key_id,
        )  # fmt: skip
        forged = sign_envelope(unsigned, rt.key)
        outcome = await queue_and_try(rt, forged)
        parked = outbox.rows(rt.conn)

    assert outcome.state == "failed", outcome.as_dict()
    assert outcome.detail is not None
    assert "AB-2013" in outcome.detail
    assert [(r["id"], r["next_attempt_at"]) for r in parked] == [(forged["id"], outbox.PARKED)]
    assert await pair.stack.message_status(forged["id"]) is None


async def _pull(rt: Runtime, count: int) -> list[dict[str, Any]]:
    """Deliveries from the gateway until ``count`` have come, as the sidecar's receiver pulls."""
    got: list[dict[str, Any]] = []
    while len(got) < count:
        body = await rt.session.call(rt.client.receive, 5)
        got += body.get("deliveries") or []
    return got


async def _altered_on_the_way(pair: World, text: str) -> str:
    """alice sends ``text`` to bob; bob's sidecar library pulls it altered, refuses it and
    flushes the refusal (a term). The message id."""
    alice, bob = pair.alice, pair.bob
    sent = (await alice.cli("send", bob.address, text))["msg_id"]
    async with open_runtime(bob.credentials, bob.state_dir) as rt:
        (delivery,) = await _pull(rt, 1)
        delivery["envelope"]["data"]["text"] = "altered on the way"
        assert accept_deliveries(rt.conn, [delivery], rt.address, utcnow()) == [(sent, REFUSED)]
        await flush(rt, drain=True)
    return str(sent)


async def test_a_delivery_altered_on_the_way_is_refused_and_dead_lettered(pair: World) -> None:
    sent = await _altered_on_the_way(pair, "the real text")
    assert sent not in pair.bob.received()
    msg = uuid.UUID(hex=sent.removeprefix("msg_"))
    reason = await pair.stack.value("SELECT dlq_reason FROM delivery_state WHERE msg_id = %s", msg)
    assert reason == "rejected_by_recipient:signature_invalid"
    assert await pair.stack.message_status(sent) == "dead_lettered"


async def test_a_dead_letter_is_listed_redriven_by_its_sender_and_presented_once(
    pair: World,
) -> None:
    alice, bob = pair.alice, pair.bob
    sent = await _altered_on_the_way(pair, "worth a second try")
    await until(lambda: _status_is(pair, sent, "dead_lettered"), 30, "the message dead-lettered")

    listed = (await alice.cli("dead-letters"))["dead_letters"]
    assert [(m["id"], m["dlq_reason"]) for m in listed] == [
        (sent, "rejected_by_recipient:signature_invalid")
    ]
    assert (await bob.cli("redrive", sent, expect=4))["error"]["code"] == "AB-1008"
    assert (await alice.cli("redrive", sent))["status"] == "accepted"
    assert (await alice.cli("redrive", sent, expect=4))["error"]["code"] == "AB-8009"

    inbox = await bob.cli("inbox")  # the genuine envelope this time, presented once
    assert [(m["msg_id"], m["data"]["text"]) for m in inbox["messages"]] == [
        (sent, "worth a second try")
    ]
    assert (await alice.cli("dead-letters"))["dead_letters"] == []
    await bob.cli("read", sent)
    await bob.cli("inbox")
    await until(lambda: _status_is(pair, sent, "read"), 30, "the redriven message read")


async def test_a_file_travels_as_an_attachment_and_comes_back_whole(
    pair: World, tmp_path: Path
) -> None:
    alice, bob = pair.alice, pair.bob
    diff = tmp_path / "change.diff"
    diff.write_bytes(b"--- a\n+++ b\n" + bytes(range(256)) * 4000)  # about 1 MiB, not text
    sent = await alice.cli("send", bob.address, "the patch", "--attach", str(diff))
    [listed] = (await bob.cli("inbox"))["messages"]
    [item] = listed["data"]["attachments"]
    assert (listed["msg_id"], item["name"], item["content_type"]) == (
        sent["msg_id"], "change.diff", "text/x-diff",
    )  # fmt: skip
    refused = await bob.cli("blob", "get", item["blob"], expect=4)
    assert refused["error"]["code"] == "AB-8002", "a party names the message"
    out = tmp_path / "received.diff"
    got = await bob.cli("blob", "get", item["blob"], "--message", sent["msg_id"], "-o", str(out))
    assert (got["size_bytes"], out.read_bytes()) == (diff.stat().st_size, diff.read_bytes())

    put = await alice.cli("blob", "put", str(diff))
    again = tmp_path / "mine.diff"
    await alice.cli("blob", "get", put["blob"], "-o", str(again))  # the uploader needs no message
    assert again.read_bytes() == diff.read_bytes()
    missing = await alice.cli(
        "send", bob.address, "x", "--attach", str(tmp_path / "nope"), expect=2
    )
    assert missing == {}, "a file that is not there is a usage error, before anything is sent"


async def test_over_the_unread_cap_a_delivery_is_deferred_and_comes_back(pair: World) -> None:
    alice, bob = pair.alice, pair.bob
    async with open_runtime(alice.credentials, alice.state_dir) as rt:
        sent = [
            (await send_message(rt, bob.address, {"text": f"note {n}"})).envelope["id"]
            for n in range(3)
        ]
    async with open_runtime(bob.credentials, bob.state_dir) as rt:
        first = dict(
            accept_deliveries(rt.conn, await _pull(rt, 3), rt.address, utcnow(), unread_cap=2)
        )
        await flush(rt, drain=True)  # two transport acks, one nak for 1 s
        (deferred,) = [msg_id for msg_id, outcome in first.items() if outcome == "deferred"]
        assert sorted(first.values()) == ["deferred", "stored", "stored"]
        assert deferred not in bob.received()

        # back after the nak's delay (1 s), long before AckWait (30 s) would bring it
        (again,) = await asyncio.wait_for(_pull(rt, 1), 10)
        accept_deliveries(rt.conn, [again], rt.address, utcnow())
        await flush(rt, drain=True)

    assert (again["msg_id"], again["attempt"]) == (deferred, 2)
    assert_exactly_once(bob, sent)


async def test_a_receipt_without_a_sequence_holds_its_lane_until_published(
    sidecars: World,
) -> None:
    stack, alice, bob = sidecars.stack, sidecars.alice, sidecars.bob
    conversation = (await alice.cli("send", bob.address, "before"))["conversation"]
    await asyncio.to_thread(stack.nats.stop)
    async with open_runtime(alice.credentials, alice.state_dir) as rt:
        first = await send_message(rt, bob.address, {"text": "one"}, conversation=conversation)
        second = await send_message(rt, bob.address, {"text": "two"}, conversation=conversation)

        assert first.state == "sent", first.as_dict()
        assert first.receipt is not None
        assert first.receipt["seq"] is None  # accepted, not yet in the stream
        assert second.state == "queued", second.as_dict()  # held behind it
        assert await stack.message_status(second.envelope["id"]) is None

        await asyncio.to_thread(stack.nats.start)  # the reconciler publishes the first
        await drain_outbox(rt, within=60)

    ids = [first.envelope["id"], second.envelope["id"]]
    await bob.start()
    rows = await wait_received(bob, set(ids), 60, stack)
    assert rows[ids[0]]["stream_seq"] < rows[ids[1]]["stream_seq"]


async def test_a_redelivery_after_a_lost_transport_ack_is_not_presented_twice(
    pair: World,
) -> None:
    alice, bob = pair.alice, pair.bob
    msg_id = (await alice.cli("send", bob.address, "exactly once"))["msg_id"]
    async with open_runtime(bob.credentials, bob.state_dir) as rt:
        (first,) = await _pull(rt, 1)
        assert accept_deliveries(rt.conn, [first], rt.address, utcnow()) == [(msg_id, "stored")]
    # The sidecar ends here, before its transport ack left. Its next run pulls before it
    # flushes, so the gateway still counts the copy as handed out but unacked, and JetStream
    # brings it again once its AckWait (30 s) has passed.
    async with open_runtime(bob.credentials, bob.state_dir) as rt:
        (again,) = await asyncio.wait_for(_pull(rt, 1), 60)
        second = accept_deliveries(rt.conn, [again], rt.address, utcnow())
        await flush(rt, drain=True)

    assert (again["msg_id"], again["attempt"]) == (msg_id, 2)
    assert second == [(msg_id, "duplicate")]
    assert_exactly_once(bob, [msg_id])
    assert await pair.stack.message_status(msg_id) == "delivered"


async def test_a_transport_ack_that_loses_to_the_expiry_sweep_is_answered_terminal(
    pair: World,
) -> None:
    alice, bob, stack = pair.alice, pair.bob, pair.stack
    msg_id = (await alice.cli("send", bob.address, "short-lived", "--expires-in", "5"))["msg_id"]
    async with open_runtime(bob.credentials, bob.state_dir) as rt:
        (first,) = await _pull(rt, 1)
        assert accept_deliveries(rt.conn, [first], rt.address, utcnow()) == [(msg_id, "stored")]
        # The copy is handed out and stored, its transport ack not sent yet, when it expires
        # and the sweep (every 60 s in the gateway; one pass of the same code here) takes it.
        expires = parse_ts(first["envelope"]["expires"])
        await asyncio.sleep(max(0.0, (expires - utcnow()).total_seconds()) + 0.2)
        assert await stack.sweep_expired() >= 1
        await flush(rt, drain=True)

    assert await stack.message_status(msg_id) == "expired"
    assert msg_id not in bob.received(), "the ack answered terminal: the inbox row is dropped"
    assert bob.present_all() == []


@pytest.fixture
def faketime() -> str:
    """libfaketime's command (Debian package ``faketime``): a process with its clock shifted."""
    path = shutil.which("faketime")
    if path is None:
        service_missing("faketime", "not found (Debian package 'faketime')")
    return path


@pytest.mark.parametrize("off", ["+10m", "-10m"])
async def test_a_sidecar_clock_minutes_off_is_corrected_by_the_gateway(
    pair: World, shared_stack: tuple[Stack, str], faketime: str, tmp_path: Path, off: str
) -> None:
    stack, token = shared_stack
    bob = pair.bob
    name = f"carol-{uuid.uuid4().hex[:6]}"
    carol = Sidecar(name, tmp_path / name, wrap=(faketime, "-f", off))
    try:
        # register learns the offset before it dates its key proof, and stores it
        await carol.enroll(stack.url, token)
        [stored] = carol.query("SELECT value FROM meta WHERE key = 'server_time_offset_ms'")
        expected = -600_000 if off == "+10m" else 600_000
        assert abs(int(stored["value"]) - expected) < 5_000, stored["value"]
        sent = await carol.cli("send", bob.address, "from a clock ten minutes off")
        assert sent["state"] == "sent", sent
        await bob.start()
        await wait_received(bob, {sent["msg_id"]}, 60, stack)

        back = await bob.cli("send", carol.address, "and back")
        await carol.start()
        await wait_received(carol, {back["msg_id"]}, 60, stack)
        assert_exactly_once(carol, [back["msg_id"]])

        checks = {c["name"]: c for c in (await carol.cli("doctor"))["checks"]}
        assert checks["clock skew"]["status"] == "warn", checks["clock skew"]
    finally:
        await carol.stop()


async def test_a_key_proof_refused_for_its_time_is_made_again_with_the_corrected_clock(
    pair: World, shared_stack: tuple[Stack, str], faketime: str, tmp_path: Path
) -> None:
    stack, token = shared_stack
    name = f"dave-{uuid.uuid4().hex[:6]}"
    dave = Sidecar(name, tmp_path / name, wrap=(faketime, "-f", "-10m"))
    await dave.enroll(stack.url, token)
    first = await dave.cli("send", pair.bob.address, "learns the offset")
    assert first["state"] == "sent", first
    # The clock jumped since: the stored offset is stale, and no cached credential is left.
    with contextlib.closing(sqlite3.connect(dave.state_db)) as conn, conn:
        conn.execute("UPDATE meta SET value = '0' WHERE key = 'server_time_offset_ms'")
    raw = json.loads(dave.credentials.read_text())
    raw["agent_credential"] = None
    dave.credentials.write_text(json.dumps(raw))

    again = await dave.cli("send", pair.bob.address, "after a refused proof")

    assert again["state"] == "sent", again
    stored = dave.query("SELECT value FROM meta WHERE key = 'server_time_offset_ms'")
    assert abs(int(stored[0]["value"]) - 600_000) < 5_000, "the refusal corrected the offset"


async def test_a_send_dated_ahead_by_a_stale_offset_waits_until_the_gateway_takes_it(
    pair: World,
) -> None:
    alice, bob = pair.alice, pair.bob
    first = await alice.cli("send", bob.address, "learns the offset")
    assert first["state"] == "sent", first
    # The clock was put right since: the stored offset now dates ids 5 min 5 s ahead, past what
    # the gateway takes (5 min, AB-2009).
    with contextlib.closing(sqlite3.connect(alice.state_db)) as conn, conn:
        conn.execute("UPDATE meta SET value = '305000' WHERE key = 'server_time_offset_ms'")

    queued = await alice.cli("send", bob.address, "dated ahead")

    assert queued["state"] == "queued", queued
    assert "AB-2009" in queued["detail"], queued
    [row] = alice.query("SELECT next_attempt_at FROM outbox WHERE id = ?", queued["msg_id"])
    assert row["next_attempt_at"] != outbox.PARKED
    await asyncio.gather(alice.start(), bob.start())
    await wait_received(bob, {first["msg_id"], queued["msg_id"]}, 60, pair.stack)
    assert_exactly_once(bob, [first["msg_id"], queued["msg_id"]])


def stored_credentials(sidecar: Sidecar) -> dict[str, Any]:
    raw: dict[str, Any] = json.loads(sidecar.credentials.read_text())
    return raw


async def test_a_key_near_its_end_is_rotated_by_the_loop_and_the_old_one_revoked(
    pair: World,
) -> None:
    alice, bob = pair.alice, pair.bob
    await alice.cli("send", bob.address, "signed with the first key")
    first = stored_credentials(alice)
    assert parse_ts(first["key_expires_at"]) - utcnow() > timedelta(days=89)
    raw = {**first, "key_expires_at": format_ts(utcnow() + timedelta(days=29))}
    alice.credentials.write_text(json.dumps(raw))  # as if sixty-one days had passed

    await alice.start()
    await bob.start()
    try:

        async def rotated() -> dict[str, Any] | None:
            now = stored_credentials(alice)
            return now if now["key_id"] != first["key_id"] else None

        second = await until(rotated, 30, "the rotated key in credentials.json")
        assert "next_private_key" not in second, "the pending key became the key"
        assert second["private_key"] != first["private_key"]
        assert parse_ts(second["key_expires_at"]) - utcnow() > timedelta(days=89)
        sent = await alice.cli("send", bob.address, "signed with the second key")
        rows = await wait_received(bob, {sent["msg_id"]}, 30, pair.stack)
        assert json.loads(rows[sent["msg_id"]]["envelope"])["keyid"] == second["key_id"]
        assert "key rotated" in alice.log()
    finally:
        await alice.stop()
        await bob.stop()

    keys = (await alice.cli("keys", "list"))["keys"]
    assert [(k["id"], k["current"]) for k in keys] == [
        (first["key_id"], False),
        (second["key_id"], True),
    ]
    await alice.cli("keys", "revoke", first["key_id"])
    refused = await alice.cli("keys", "revoke", second["key_id"], expect=4)
    assert refused["error"]["code"] == "AB-8008", refused
    [old, _] = (await alice.cli("keys", "list"))["keys"]
    assert old["revoked_at"] is not None
    meta = alice.query("SELECT value FROM meta WHERE key = 'key_fingerprint'")
    assert meta[0]["value"] == keys[1]["fingerprint"]
    assert (await alice.cli("doctor"))["status"] == "ok"


async def test_a_rotation_cut_short_offers_the_same_key_again(pair: World) -> None:
    """The gateway took the new key, then the sidecar stopped before switching to it."""
    alice = pair.alice
    async with open_runtime(alice.credentials, alice.state_dir) as rt:
        pending = generate_key()
        rt.creds.next_private_key = private_key_pem(pending)
        save_credentials(alice.credentials, rt.creds)
        proof = key_proof(pending, rt.agent_id, server_now())
        taken = await rt.session.call(
            rt.client.add_key, rt.agent_id, public_key_b64url(pending), proof
        )

    done = await alice.cli("keys", "rotate")

    assert done["key_id"] == taken["id"]
    assert stored_credentials(alice)["key_id"] == taken["id"]
    assert len((await alice.cli("keys", "list"))["keys"]) == 2


async def test_an_agent_finds_its_peers_by_capability_and_name(pair: World) -> None:
    alice, bob = pair.alice, pair.bob
    reviewers = [
        a["address"] for a in (await alice.cli("agents", "--capability", "code.review"))["agents"]
    ]
    assert bob.address in reviewers
    assert alice.address not in reviewers
    named = (await alice.cli("agents", "--query", bob.name))["agents"]
    assert bob.address in [a["address"] for a in named]
    assert (await alice.cli("agents", "--status", "lost", expect=4))["error"]["code"] == "AB-8001"


async def test_after_state_db_is_lost_the_inbox_gets_back_what_was_delivered_and_not_read(
    pair: World,
) -> None:
    alice, bob = pair.alice, pair.bob
    first = (await alice.cli("send", bob.address, "read before the loss"))["msg_id"]
    second = (await alice.cli("send", bob.address, "delivered, not read"))["msg_id"]
    await bob.cli("inbox")  # stores both and sends their transport acks
    await bob.cli("read", first)
    await bob.cli("inbox")  # flushes the read

    async def settled() -> bool:
        statuses = [await pair.stack.message_status(m) for m in (first, second)]
        return statuses == ["read", "delivered"]

    await until(settled, 30, "first read and second delivered at the gateway")
    shutil.rmtree(bob.state_dir)  # the disk is gone; credentials.json survives

    listed = await bob.cli("inbox")  # a new state.db for a registered agent: restored at once

    assert listed["resync"] == {second: "stored"}, listed
    assert [m["msg_id"] for m in listed["messages"]] == [second]
    again = await bob.cli("inbox", "--resync")
    assert again["resync"] == {second: "duplicate"}, again
    await bob.cli("read", second)
    await bob.cli("inbox")
    await until(lambda: _status_is(pair, second, "read"), 30, "the restored message read")


async def _status_is(pair: World, msg_id: str, status: str) -> bool:
    return await pair.stack.message_status(msg_id) == status


async def revoke_current_key(pair: World, agent: Sidecar) -> dict[str, Any]:
    """The owner installs the agent again elsewhere (a new key, through the token), then
    revokes the key ``agent``'s sidecar holds; ``agent``'s credentials.json as it was."""
    stored = stored_credentials(agent)
    owner = {"Authorization": f"Bearer {stored['integration_token']}"}
    keys_path = f"/v1/agents/{stored['agent_id']}/keys"
    elsewhere = generate_key()
    async with httpx.AsyncClient(base_url=pair.stack.url) as client:
        body = {"public_key": public_key_b64url(elsewhere),
                "proof": key_proof(elsewhere, stored["agent_id"], server_now())}  # fmt: skip
        assert (await client.post(keys_path, json=body, headers=owner)).status_code == 201
        revoked = await client.delete(f"{keys_path}/{stored['key_id']}", headers=owner)
        assert revoked.status_code == 204, revoked.text
    await asyncio.sleep(1.1)  # every gateway instance has seen the revocation
    return stored


async def test_an_agent_whose_key_was_revoked_rotates_with_its_token(pair: World) -> None:
    """A leaked key revoked by the owner: the agent cannot prove anything with it, so
    ``agentbus keys rotate`` offers the new key with the integration token and keeps the
    address."""
    alice, bob = pair.alice, pair.bob
    await alice.cli("send", bob.address, "before the leak")
    stored = await revoke_current_key(pair, alice)
    refused = await alice.cli("send", bob.address, "with the revoked key", expect=4)
    assert "AB-2012" in refused["error"]["message"], refused
    checks = {c["name"]: c for c in (await alice.cli("doctor", expect=1))["checks"]}
    assert checks["key at gateway"]["status"] == "fail", checks
    assert "agentbus keys rotate" in checks["key at gateway"]["detail"]

    done = await alice.cli("keys", "rotate")

    assert done["old_key_id"] == stored["key_id"]
    assert done["signed_again"] == [refused["error"]["msg_id"]]  # never accepted: goes again
    sent = await alice.cli("send", bob.address, "with the new key")
    assert sent["state"] == "sent", sent
    assert await pair.stack.message_status(refused["error"]["msg_id"]) == "accepted"
    assert stored_credentials(alice)["address"] == stored["address"]
    assert (await alice.cli("doctor"))["status"] == "ok"


async def test_a_running_sidecar_replaces_a_revoked_key_by_itself(pair: World) -> None:
    """Once its credential has to be renewed, the loop's heartbeat meets AB-1010 and the loop
    rotates at once, through the token."""
    alice, bob = pair.alice, pair.bob
    await alice.cli("send", bob.address, "before the leak")
    stored = await revoke_current_key(pair, alice)
    alice.credentials.write_text(json.dumps({**stored, "agent_credential": None}))

    await alice.start()
    try:

        async def replaced() -> dict[str, Any] | None:
            # credentials.json is written before the loop logs the rotation: wait for both
            now = stored_credentials(alice)
            rotated = now["key_id"] != stored["key_id"] and "key rotated" in alice.log()
            return now if rotated else None

        await until(replaced, 30, f"a new key in alice's credentials.json\n{alice.log()}")
    finally:
        await alice.stop()
    sent = await alice.cli("send", bob.address, "with the new key")
    assert sent["state"] == "sent", sent
