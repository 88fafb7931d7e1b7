"""The outbox drain and the sync loop while the gateway is unreachable, and lane selection.

No gateway runs here: these tests cover what the sidecar does on its own. The exchanges with a
live gateway are listed as end-to-end tests to add in docs/agentbus/sidecar.md.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from agentbus_sidecar import clock
from agentbus_sidecar.actions.sending import send_message
from agentbus_sidecar.clock import format_ts, parse_ts, to_ms, utcnow
from agentbus_sidecar.envelope import MESSAGE, TASK_REQUEST
from agentbus_sidecar.errors import ConfigError, GatewayError
from agentbus_sidecar.ids import restart_ids
from agentbus_sidecar.outbound import (
    ID_AHEAD_LIMIT,
    ID_AHEAD_MAX_WAIT,
    SEND_BATCH,
    FlushReport,
    blocked_recipients,
    id_ahead_wait,
    lane_runs,
    refused,
)
from agentbus_sidecar.runtime import open_runtime
from agentbus_sidecar.store import outbox, receipts
from agentbus_sidecar.sync import (
    LONG_POLL,
    PUSH,
    flush,
    hold_run_lock,
    run,
    run_lock_held,
    sync_once,
)
from hypothesis import given
from hypothesis import strategies as st

PEER = "agent://acme/platform/reviewer"
OTHER = "agent://acme/platform/tester"


async def test_sends_queue_offline_and_back_off(agent: Any) -> None:
    async with open_runtime(agent.creds_path, agent.state_dir) as rt:
        outcome = await send_message(rt, PEER, {"text": "hi"})
        assert outcome.state == "queued"
        assert "unreachable" in (outcome.detail or "")
        row = outbox.get(rt.conn, outcome.envelope["id"])
        assert row is not None
        assert row["attempts"] == 1
        backoff = parse_ts(row["next_attempt_at"]) - parse_ts(row["created_at"])
        assert backoff >= timedelta(milliseconds=500)
        outbox.record_failure(rt.conn, row["id"], utcnow(), "down", retry_after_s=3600)
        report = await flush(rt)  # not due: nothing is tried, attempts unchanged
        assert report.deferred == {}
        assert report.sent == []
        assert outbox.get(rt.conn, outcome.envelope["id"])["attempts"] == 2  # type: ignore[index]


@pytest.mark.parametrize(
    ("error", "parked"),
    [(GatewayError(401, "AB-1003", "token_revoked", "revoked"), False),
     (GatewayError(401, "AB-1012", "clock_skew", "off"), False),
     (GatewayError(404, "AB-3002", "recipient_not_found", "nobody"), True)],
)  # fmt: skip
async def test_only_a_refused_envelope_is_parked(
    agent: Any, error: GatewayError, parked: bool
) -> None:
    async with open_runtime(agent.creds_path, agent.state_dir) as rt:
        msg_id = (await send_message(rt, PEER, {"text": "hi"})).envelope["id"]
        report = FlushReport()
        refused(rt, msg_id, error, utcnow(), report, None)
        row = outbox.get(rt.conn, msg_id)
        assert row is not None
        assert (row["next_attempt_at"] == outbox.PARKED) is parked, dict(row)
        assert (msg_id in report.failed, msg_id in report.deferred) == (parked, not parked)


@pytest.fixture
def clock_restored() -> Iterator[None]:
    """Puts the clock offset and the id source back after a test that moved them."""
    try:
        yield
    finally:
        clock.set_server_offset_ms(0)
        restart_ids()  # or every later id of this process would stay ahead


async def test_an_id_minted_ahead_waits_until_the_gateway_takes_it(
    agent: Any, clock_restored: None
) -> None:
    async with open_runtime(agent.creds_path, agent.state_dir) as rt:
        clock.set_server_offset_ms(7 * 60_000)  # as a stale stored offset would
        msg_id = (await send_message(rt, PEER, {"text": "hi"})).envelope["id"]
        clock.set_server_offset_ms(0)  # the refusal's Date header corrected the offset
        now, report = utcnow(), FlushReport()
        refused(rt, msg_id, GatewayError(422, "AB-2009", "message_id_in_future", "ahead"),
                now, report, None)  # fmt: skip
        row = outbox.get(rt.conn, msg_id)
        assert row is not None
        assert msg_id in report.deferred
        wait = parse_ts(row["next_attempt_at"]) - now
        assert timedelta(minutes=2) <= wait <= timedelta(minutes=2, seconds=5), wait


def _id_at(moment: datetime) -> str:
    return f"msg_{to_ms(moment):012x}7{'0' * 19}"


@given(ahead_ms=st.integers(min_value=-86_400_000, max_value=3 * 3_600_000))
def test_the_wait_for_an_id_ends_once_the_gateway_takes_it(ahead_ms: int) -> None:
    now = datetime(2026, 12, 1, 9, 30, tzinfo=UTC)
    minted = now + timedelta(milliseconds=ahead_ms)
    taken_from = minted - ID_AHEAD_LIMIT  # the gateway's time from which it takes the id
    wait = id_ahead_wait(_id_at(minted), now)
    if taken_from - now > ID_AHEAD_MAX_WAIT - timedelta(seconds=1):
        assert wait is None  # a clock that far off is parked for a person to see
    else:
        assert wait is not None
        assert now + wait >= taken_from
        assert wait <= max(taken_from - now, timedelta(0)) + timedelta(seconds=1)


async def test_queued_acks_back_off_too(agent: Any) -> None:
    async with open_runtime(agent.creds_path, agent.state_dir) as rt:
        outbox.put(rt.conn, "ack:msg_x:application", "ack", {"msg_id": "msg_x"}, utcnow())
        report = await flush(rt)
        assert report.unreachable is not None
        row = outbox.get(rt.conn, "ack:msg_x:application")
        assert row is not None
        assert row["attempts"] == 1
        assert "unreachable" in row["last_error"]


async def test_a_drain_sends_acks_that_are_not_due_yet(agent: Any) -> None:
    async with open_runtime(agent.creds_path, agent.state_dir) as rt:
        now = utcnow()
        outbox.put(rt.conn, "ack:msg_x:transport", "ack", {"msg_id": "msg_x"}, now)
        outbox.record_failure(rt.conn, "ack:msg_x:transport", now, "down", retry_after_s=3600)
        await flush(rt)  # backing off: not tried
        assert outbox.get(rt.conn, "ack:msg_x:transport")["attempts"] == 1  # type: ignore[index]
        await flush(rt, drain=True)  # before a pull every queued ack is tried
        assert outbox.get(rt.conn, "ack:msg_x:transport")["attempts"] == 2  # type: ignore[index]


async def test_sync_once_reports_offline_and_keeps_local_work(agent: Any) -> None:
    async with open_runtime(agent.creds_path, agent.state_dir) as rt:
        report = await sync_once(rt, wait_s=0)
        assert report.flush.unreachable is not None
        assert report.received == []


@pytest.mark.parametrize(
    ("delivery", "failure"),
    [(PUSH, "delivery WebSocket failed"), (LONG_POLL, "receive failed")],
)
async def test_the_loop_runs_offline_and_stops_when_told(
    agent: Any, delivery: str, failure: str
) -> None:
    lines: list[str] = []
    async with open_runtime(agent.creds_path, agent.state_dir) as rt:
        stop = asyncio.Event()
        asyncio.get_running_loop().call_later(1.5, stop.set)
        loop = run(rt, stop, wait_s=1, delivery=delivery, log=lines.append)
        await asyncio.wait_for(loop, timeout=10)
    assert any(failure in line and "gateway unreachable" in line for line in lines), lines


async def test_the_loop_refuses_an_unknown_delivery(agent: Any) -> None:
    async with open_runtime(agent.creds_path, agent.state_dir) as rt:
        with pytest.raises(ConfigError, match="websocket, long-poll"):
            await run(rt, asyncio.Event(), delivery="carrier-pigeon")


def test_only_one_sidecar_per_agent(tmp_path: Any) -> None:
    db = tmp_path / "state.db"

    def second_sidecar() -> None:
        with hold_run_lock(db):
            pass

    with hold_run_lock(db), pytest.raises(ConfigError, match="already running"):
        second_sidecar()
    second_sidecar()  # released on exit


def test_whether_a_sidecar_runs_is_told_without_taking_the_lock(tmp_path: Any) -> None:
    db = tmp_path / "state.db"
    assert not run_lock_held(db)
    with hold_run_lock(db):
        assert run_lock_held(db)
        assert run_lock_held(db)  # asking does not take it
    assert not run_lock_held(db)
    with hold_run_lock(db):  # nor keep it
        pass


def _queue(
    db: sqlite3.Connection, msg_id: str, recipient: str, conversation: str, kind: str = MESSAGE
) -> None:
    envelope = {"id": msg_id, "recipient": recipient, "conversation": conversation, "type": kind}
    outbox.enqueue_send(db, envelope, utcnow())


def _runs(db: sqlite3.Connection, blocked: set[str]) -> list[list[str]]:
    return [[row["id"] for row in run] for run in lane_runs(outbox.pending_sends(db), blocked)]


def test_a_lane_sends_its_oldest_messages_together(db: sqlite3.Connection) -> None:
    _queue(db, "msg_1", PEER, "cnv_a")
    _queue(db, "msg_2", PEER, "cnv_a")
    _queue(db, "msg_3", PEER, "cnv_b")
    _queue(db, "msg_4", OTHER, "cnv_a")
    _queue(db, "msg_5", PEER, "cnv_a")
    assert _runs(db, set()) == [["msg_1", "msg_2", "msg_5"], ["msg_3"], ["msg_4"]]
    outbox.park(db, "msg_1", "AB-3002 recipient_not_found")  # a failed message leaves its lane
    assert _runs(db, {OTHER}) == [["msg_2", "msg_5"], ["msg_3"]]


def test_a_task_envelope_goes_alone_and_ends_its_lanes_run(db: sqlite3.Connection) -> None:
    _queue(db, "msg_1", PEER, "cnv_a")
    _queue(db, "msg_2", PEER, "cnv_a", TASK_REQUEST)
    _queue(db, "msg_3", PEER, "cnv_a")
    _queue(db, "msg_4", OTHER, "cnv_b", TASK_REQUEST)
    _queue(db, "msg_5", OTHER, "cnv_b")
    assert _runs(db, set()) == [["msg_1"], ["msg_4"]]


def test_a_lane_run_holds_at_most_one_batch(db: sqlite3.Connection) -> None:
    for n in range(SEND_BATCH + 5):
        _queue(db, f"msg_{n:04d}", PEER, "cnv_a")
    (run,) = _runs(db, set())
    assert run == [f"msg_{n:04d}" for n in range(SEND_BATCH)]


def test_unpublished_receipts_hold_their_recipient(db: sqlite3.Connection) -> None:
    now = utcnow()

    def accepted(rcp: str, to: str, seq: int | None, age: timedelta) -> None:
        envelope = {"id": "msg_" + rcp, "recipient": to, "type": "agentbus.message.v1"}
        at = format_ts(now - age)
        receipts.record(db, {"id": rcp, "seq": seq}, envelope, queued_at=at, accepted_at=at)

    accepted("rcp_1", PEER, None, timedelta(seconds=5))
    accepted("rcp_2", OTHER, 12, timedelta(seconds=5))
    accepted("rcp_3", "agent://acme/platform/old", None, timedelta(hours=25))
    assert blocked_recipients(db, now) == {PEER}
    receipts.set_stream_seq(db, "rcp_1", 13, now)
    assert blocked_recipients(db, now) == set()
    row = receipts.find(db, "msg_rcp_1")
    assert row is not None
    assert [e["event"] for e in receipts.events_of(row)] == ["queued", "accepted", "published"]


def test_flush_report_defaults() -> None:
    report = FlushReport()
    assert (report.sent, report.failed, report.deferred, report.settled) == ([], {}, {}, 0)
    assert json.dumps(report.__dict__)
